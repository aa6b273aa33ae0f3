// A HEADERS frame's fields as nghttp2 takes them, on the stack for the
// usual few: a call's request, response headers and trailers allocate
// nothing here. nghttp2 copies a field at submit time unless it is added
// as static.
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace uxds::http2 {

class NvList {
 public:
  void Add(std::string_view name, std::string_view value) {
    Push(name, value, NGHTTP2_NV_FLAG_NONE);
  }
  // Literals, which outlive the frame: nghttp2 keeps them uncopied.
  void AddStatic(std::string_view name, std::string_view value) {
    Push(name, value, NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE);
  }
  void Add(const std::vector<std::pair<std::string, std::string>>& fields) {
    for (const auto& [name, value] : fields) Add(name, value);
  }
  const nghttp2_nv* data() const { return spilled_.empty() ? inline_.data() : spilled_.data(); }
  size_t size() const { return size_; }
  const nghttp2_nv* begin() const { return data(); }
  const nghttp2_nv* end() const { return data() + size_; }

 private:
  void Push(std::string_view name, std::string_view value, uint8_t flags) {
    nghttp2_nv nv;
    nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
    nv.namelen = name.size();
    nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
    nv.valuelen = value.size();
    nv.flags = flags;
    if (size_ < inline_.size()) {
      inline_[size_++] = nv;
      return;
    }
    if (spilled_.empty()) spilled_.assign(inline_.begin(), inline_.end());
    spilled_.push_back(nv);
    ++size_;
  }

  std::array<nghttp2_nv, 16> inline_;
  std::vector<nghttp2_nv> spilled_;
  size_t size_ = 0;
};

}  // namespace uxds::http2
