#include "xds/client/protobuf_wire.h"

namespace uxds::xds_internal {

namespace {

// protobuf's own limit on nested groups and messages.
constexpr int kMaxGroupDepth = 100;
// Field numbers are 29 bits wide.
constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;

}  // namespace

bool ProtobufWireReader::ReadVarint(uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (offset_ >= bytes_.size()) return false;
    const auto byte = static_cast<uint8_t>(bytes_[offset_++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;  // more than 10 bytes
}

bool ProtobufWireReader::SkipValue(uint32_t number, WireType wire_type, int depth) {
  uint64_t value = 0;
  switch (wire_type) {
    case WireType::kVarint:
      return ReadVarint(value);
    case WireType::kFixed64:
    case WireType::kFixed32: {
      const size_t size = wire_type == WireType::kFixed64 ? 8 : 4;
      if (bytes_.size() - offset_ < size) return false;
      offset_ += size;
      return true;
    }
    case WireType::kLengthDelimited:
      if (!ReadVarint(value) || value > bytes_.size() - offset_) return false;
      offset_ += static_cast<size_t>(value);
      return true;
    case WireType::kStartGroup:
      if (depth >= kMaxGroupDepth) return false;
      for (;;) {
        uint64_t tag = 0;
        if (!ReadVarint(tag)) return false;
        const auto inner_number = static_cast<uint32_t>(tag >> 3);
        const auto inner_type = static_cast<WireType>(tag & 7);
        if (inner_type == WireType::kEndGroup) return inner_number == number;
        if (tag >> 3 == 0 || tag >> 3 > kMaxFieldNumber) return false;
        if (!SkipValue(inner_number, inner_type, depth + 1)) return false;
      }
    case WireType::kEndGroup:
      return false;  // without its start
  }
  return false;  // wire types 6 and 7 do not exist
}

bool ProtobufWireReader::Next(Field& field) {
  if (failed_ || offset_ >= bytes_.size()) return false;
  const size_t start = offset_;
  uint64_t tag = 0;
  if (!ReadVarint(tag) || tag >> 3 == 0 || tag >> 3 > kMaxFieldNumber) {
    failed_ = true;
    return false;
  }
  field.number = static_cast<uint32_t>(tag >> 3);
  field.wire_type = static_cast<WireType>(tag & 7);
  const size_t value_start = offset_;
  if (!SkipValue(field.number, field.wire_type, 0)) {
    failed_ = true;
    return false;
  }
  field.encoded = bytes_.substr(start, offset_ - start);
  field.payload = {};
  if (field.wire_type == WireType::kLengthDelimited) {
    // The length varint is re-read to find where the payload starts.
    size_t payload_start = value_start;
    while (static_cast<uint8_t>(bytes_[payload_start]) & 0x80) ++payload_start;
    ++payload_start;
    field.payload = bytes_.substr(payload_start, offset_ - payload_start);
  }
  return true;
}

bool LastLengthDelimitedField(std::string_view message, uint32_t number,
                              std::string_view& payload) {
  ProtobufWireReader reader(message);
  ProtobufWireReader::Field field;
  bool found = false;
  while (reader.Next(field)) {
    if (field.number == number && field.wire_type == WireType::kLengthDelimited) {
      payload = field.payload;
      found = true;
    }
  }
  return found && !reader.failed();
}

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendLengthDelimited(std::string& out, uint32_t number, std::string_view payload) {
  AppendVarint(out, (uint64_t{number} << 3) | static_cast<uint64_t>(WireType::kLengthDelimited));
  AppendVarint(out, payload.size());
  out.append(payload);
}

}  // namespace uxds::xds_internal
