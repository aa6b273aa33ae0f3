// The protobuf wire format, read and written by hand where a generated
// message would copy too much: a DiscoveryResponse of 100 000 resources is
// read without copying them (each one is decoded on its own, a slice at a
// time), and a DiscoveryRequest naming 100 000 resources is written straight
// from the subscribed set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace uxds::xds_internal {

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Reads the fields of one message level, in order, without looking into
// embedded messages.
class ProtobufWireReader {
 public:
  struct Field {
    uint32_t number = 0;
    WireType wire_type = WireType::kVarint;
    std::string_view payload;  // kLengthDelimited: the bytes
    std::string_view encoded;  // the whole field: tag and value
  };

  explicit ProtobufWireReader(std::string_view bytes) : bytes_(bytes) {}
  // The next field; false at the end of the bytes or on malformed input
  // (then failed() is true). A group is skipped as a whole field.
  bool Next(Field& field);
  bool failed() const { return failed_; }

 private:
  bool ReadVarint(uint64_t& value);
  bool SkipValue(uint32_t number, WireType wire_type, int depth);

  std::string_view bytes_;
  size_t offset_ = 0;
  bool failed_ = false;
};

// Sets `payload` to the last occurrence of length-delimited field `number`
// at the top level of `message` (the value protobuf gives a singular string
// field); false if there is none or the message is malformed.
bool LastLengthDelimitedField(std::string_view message, uint32_t number, std::string_view& payload);

void AppendVarint(std::string& out, uint64_t value);
// A length-delimited field (string, bytes or embedded message).
void AppendLengthDelimited(std::string& out, uint32_t number, std::string_view payload);

}  // namespace uxds::xds_internal
