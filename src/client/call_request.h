// What routing reads of one call (A28, A42): its path and metadata, read
// in the caller's own strings, and the values of the route table's
// interned header names, found in one pass over the metadata when routing
// first asks for one. On the calling thread's stack: routing a call
// copies no metadata and allocates nothing, unless a header a matcher or
// hash policy reads is sent several times (A28's joined value) or a hash
// policy rewrites its value (regex_rewrite).
#pragma once

#include <array>
#include <cstdint>
#include <forward_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace uxds::client_internal {

class CompiledRoutes;

// A call's metadata as the caller gave it (CallOptions::metadata).
using CallMetadata = std::span<const std::pair<std::string, std::string>>;

class CallRequest {
 public:
  CallRequest(std::string_view path, CallMetadata metadata) : path_(path), metadata_(metadata) {}
  CallRequest(const CallRequest&) = delete;
  CallRequest& operator=(const CallRequest&) = delete;

  std::string_view path() const { return path_; }
  CallMetadata metadata() const { return metadata_; }

  // A header's value as matching sees it; absent when `data` is null. Two
  // words, so it is returned in registers.
  struct Value {
    const char* data = nullptr;
    size_t size = 0;
    bool present() const { return data != nullptr; }
    std::string_view view() const { return {data, size}; }
  };

 private:
  friend class CompiledRoutes;
  // A28: the value matchers see for interned header `index` (see
  // routing::HeaderValueForMatching). The first kMemoized interned names
  // are found together, in one pass over the metadata, the first time any
  // is asked for; a name past them takes a pass of its own each time.
  Value ValueOf(const CompiledRoutes& routes, uint32_t index) {
    if (index < kMemoized) {
      if (!found_) FindInterned(routes);
      return {values_[index].data, values_[index].size};
    }
    return LookUp(routes, index);
  }
  void FindInterned(const CompiledRoutes& routes);
  Value LookUp(const CompiledRoutes& routes, uint32_t index);
  // A28: a header sent several times is matched as its values joined with
  // ','. `joined` is the joined string `value` points into, if any.
  void Join(const char*& data, size_t& size, std::string*& joined, std::string_view more);
  // Before routing by a table: the values found so far were another's (a
  // call routed again after a config change).
  void ForgetValues() { found_ = false; }

  std::string_view path_;
  CallMetadata metadata_;
  static constexpr uint32_t kMemoized = 16;
  bool found_ = false;
  // Set for the table's interned names below kMemoized once found_ (left
  // unset until then: a call that routes by no header writes none).
  struct Found {
    const char* data;
    size_t size;
    std::string* joined;  // the joined string `data` points into, if any
  };
  Found values_[kMemoized];
  // The joined values live here until the call is routed.
  std::forward_list<std::string> joined_;
};

}  // namespace uxds::client_internal
