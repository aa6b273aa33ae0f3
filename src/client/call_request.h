// What routing reads of one call (A28, A42): its path and metadata as
// views into the caller's strings, and the values of the route table's
// interned header names, looked up at most once per call. On the calling
// thread's stack: a call with up to 16 metadata entries allocates nothing
// here.
#pragma once

#include <array>
#include <cstdint>
#include <forward_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uxds/channel.h"

namespace uxds::client_internal {

class CompiledRoutes;

// A call's metadata as views into the caller's strings: up to
// kInlineHeaders entries live on the stack, more in one vector.
class CallHeaders {
 public:
  static constexpr size_t kInlineHeaders = 16;

  explicit CallHeaders(std::span<const std::pair<std::string, std::string>> metadata);
  CallHeaders(const CallHeaders&) = delete;
  CallHeaders& operator=(const CallHeaders&) = delete;

  std::span<const PickHeader> headers() const {
    return spilled_.empty() ? std::span<const PickHeader>(inline_.data(), size_)
                            : std::span<const PickHeader>(spilled_);
  }

 private:
  std::array<PickHeader, kInlineHeaders> inline_;
  size_t size_ = 0;
  std::vector<PickHeader> spilled_;
};

// What routing reads of one call: its path, its metadata, and the values
// of the interned header names found so far. On the calling thread's
// stack; views into `headers` and the call's strings.
class CallRequest {
 public:
  CallRequest(std::string_view path, std::span<const PickHeader> headers)
      : path_(path), headers_(headers) {}
  CallRequest(const CallRequest&) = delete;
  CallRequest& operator=(const CallRequest&) = delete;

  std::string_view path() const { return path_; }
  std::span<const PickHeader> headers() const { return headers_; }

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
  // routing::HeaderValueForMatching), looked up once per call.
  Value ValueOf(const CompiledRoutes& routes, uint32_t index) {
    if (index < kMemoized && ((looked_up_ >> index) & 1) != 0) return values_[index];
    return LookUp(routes, index);
  }
  Value LookUp(const CompiledRoutes& routes, uint32_t index);
  // Before routing by a table: the indices found so far were another's (a
  // call routed again after a config change).
  void ForgetValues() { looked_up_ = 0; }

  std::string_view path_;
  std::span<const PickHeader> headers_;
  // Interned headers below kMemoized are looked up once; `looked_up_` is a
  // bit set over them.
  static constexpr uint32_t kMemoized = 16;
  uint32_t looked_up_ = 0;
  std::array<Value, kMemoized> values_;
  // A header sent several times is matched as its values joined with ','
  // (A28): the joined strings live here until the call is routed.
  std::forward_list<std::string> joined_;
};

}  // namespace uxds::client_internal
