// uxds-json-to-proto DESCRIPTOR_SET: proto3 JSON in, serialized protobuf out,
// for the uxds tool (tools/uxds/json_converter.h), which links protobuf-lite
// and so cannot read JSON itself.
//
// Loads DESCRIPTOR_SET (a FileDescriptorSet made by protoc --include_imports)
// into a DescriptorPool and answers requests on stdin, one at a time:
//
//   request:  "TYPES LENGTH\n" then LENGTH bytes of JSON text, then "\n"
//   reply:    "ok TYPE_URL NAME_LINE NAME_HEX VALUE_HEX\n"
//        or   "error LINE MESSAGE\n"
//
// TYPES is a comma-separated list of message full names the text may hold.
// With a top-level "@type" the text is an Any (the type must be one of TYPES);
// without one, TYPES must be a single type, the text's. NAME is the
// message's `name` field (`cluster_name` for a ClusterLoadAssignment), empty
// when it has neither, and NAME_LINE the line of its key (0 when absent).
// LINE is where the problem is (1-based; 0 for a request that is not one).
// The hex fields are lowercase, possibly empty. End of input ends the program.
#include <google/protobuf/any.pb.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text_positions.h"

namespace uxds::json_to_proto {
namespace {

using ::uxds::LineOfKey;
using ::uxds::LineOfOffset;

namespace pb = google::protobuf;

constexpr std::string_view kTypeUrlPrefix = "type.googleapis.com/";
// A request larger than this is refused (its bytes are skipped): the tool
// never sends one, so it is a framing error or a runaway file.
constexpr size_t kMaxRequestBytes = 64u << 20;

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xf]);
  }
  return hex;
}

// One line: the reply framing has no room for newlines in messages.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

struct Reply {
  std::string text;  // without the final newline
};

Reply Error(size_t line, const std::string& message) {
  return {"error " + std::to_string(line) + " " + OneLine(message)};
}

std::vector<std::string> SplitCommas(std::string_view list) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    if (comma > start) parts.emplace_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// protobuf 3.21's JSON errors read "(outer.path) field: what." or
// "field: what.": the field's name, and the message as "outer.path.field:
// what" (an unknown field's "Cannot find field." as "unknown field").
struct FieldError {
  std::string field;   // the JSON key, "" when the message names none
  std::string parent;  // the last field of the path to it, "" at the top
  std::string message;
};

FieldError ParseFieldError(std::string message) {
  std::string path;
  if (!message.empty() && message[0] == '(') {
    const size_t close = message.find(')');
    if (close != std::string::npos) {
      path = message.substr(1, close - 1);
      message = message.substr(close + 1);
      if (message.rfind(": ", 0) == 0) {
        // "(outer.field): what": the path ends with the field itself.
        const size_t dot = path.rfind('.');
        message = path.substr(dot == std::string::npos ? 0 : dot + 1) + message;
        path = dot == std::string::npos ? "" : path.substr(0, dot);
      } else if (message.rfind(' ', 0) == 0) {
        message.erase(0, 1);
      }
    }
  }
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || message.find(' ') < colon) return {"", "", message};
  const size_t parent_start = path.rfind('.');
  FieldError error{message.substr(0, colon),
                   path.substr(parent_start == std::string::npos ? 0 : parent_start + 1),
                   message.substr(colon + 2)};
  // "filter_chains[0]": the key is the name before the index.
  error.parent = error.parent.substr(0, error.parent.find('['));
  if (error.message == "Cannot find field.") error.message = "unknown field";
  if (!error.message.empty() && error.message.back() == '.') error.message.pop_back();
  error.message = (path.empty() ? "" : path + ".") + error.field + ": " + error.message;
  return error;
}

// proto3 JSON spells field_name as fieldName (either is accepted).
std::string LowerCamel(std::string_view name) {
  std::string camel;
  bool upper = false;
  for (const char c : name) {
    if (c == '_') {
      upper = true;
    } else {
      camel.push_back(upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
      upper = false;
    }
  }
  return camel;
}

class Converter {
 public:
  explicit Converter(const pb::FileDescriptorSet& files)
      : factory_(&pool_),
        resolver_(pb::util::NewTypeResolverForDescriptorPool(
            std::string(kTypeUrlPrefix.substr(0, kTypeUrlPrefix.size() - 1)), &pool_)) {
    for (const pb::FileDescriptorProto& file : files.file()) pool_.BuildFile(file);
  }

  Reply Convert(const std::vector<std::string>& types, std::string_view text) {
    // Syntax first, with nlohmann's byte offset: protobuf's JSON errors name
    // no position.
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
      std::string what = e.what();
      // "[json.exception.parse_error.101] parse error at line 3, column 5: " ...
      const size_t colon = what.find(": ");
      if (colon != std::string::npos) what = what.substr(colon + 2);
      return Error(LineOfOffset(text, offset), "invalid JSON: " + what);
    }
    if (!parsed.is_object()) return Error(1, "not a JSON object");
    std::string type_name;
    bool is_any = false;
    if (parsed.contains("@type")) {
      const size_t type_line = LineOfKey(text, "@type", 1);
      if (!parsed["@type"].is_string()) return Error(type_line, "@type: must be a string");
      const std::string type_url = parsed["@type"].get<std::string>();
      if (type_url.rfind(kTypeUrlPrefix, 0) != 0) {
        return Error(type_line, "@type: \"" + type_url + "\" does not start with " +
                                    std::string(kTypeUrlPrefix));
      }
      type_name = type_url.substr(kTypeUrlPrefix.size());
      bool allowed = false;
      for (const std::string& t : types) allowed = allowed || t == type_name;
      if (!allowed || pool_.FindMessageTypeByName(type_name) == nullptr) {
        std::string expected;
        for (const std::string& t : types) {
          expected += (expected.empty() ? "" : ", ") + std::string(kTypeUrlPrefix) + t;
        }
        return Error(type_line, "@type: unknown type \"" + type_url +
                                    "\" (expected one of: " + expected + ")");
      }
      is_any = true;
    } else if (types.size() == 1) {
      type_name = types[0];
    } else {
      return Error(1, "@type: field not present");
    }
    const pb::Descriptor* descriptor = pool_.FindMessageTypeByName(type_name);
    if (descriptor == nullptr) return Error(0, "unknown message type " + type_name);

    std::string binary;
    const std::string parse_as =
        std::string(kTypeUrlPrefix) + (is_any ? std::string("google.protobuf.Any") : type_name);
    const auto status = pb::util::JsonToBinaryString(resolver_.get(), parse_as, text, &binary);
    if (!status.ok()) {
      const FieldError error = ParseFieldError(std::string(status.message()));
      // The key's first appearance after its parent's (either spelling).
      size_t from_line = 1;
      if (!error.parent.empty()) {
        size_t parent_line = LineOfKey(text, error.parent);
        if (parent_line == 0) parent_line = LineOfKey(text, LowerCamel(error.parent));
        if (parent_line != 0) from_line = parent_line;
      }
      size_t line = 0;
      if (!error.field.empty()) {
        line = LineOfKey(text, error.field, 0, from_line);
        if (line == 0) line = LineOfKey(text, LowerCamel(error.field), 0, from_line);
      }
      if (line == 0) line = 1;
      return Error(line, error.message);
    }
    std::string value = binary;
    if (is_any) {
      pb::Any any;
      if (!any.ParseFromString(binary)) return Error(1, "the Any does not parse");
      value = any.value();
    }
    std::unique_ptr<pb::Message> message(factory_.GetPrototype(descriptor)->New());
    if (!message->ParseFromString(value)) return Error(1, "the message does not parse");
    std::string name;
    size_t name_line = 0;
    for (const char* field_name : {"name", "cluster_name"}) {
      const pb::FieldDescriptor* field = descriptor->FindFieldByName(field_name);
      if (field == nullptr || field->type() != pb::FieldDescriptor::TYPE_STRING ||
          field->is_repeated()) {
        continue;
      }
      name = message->GetReflection()->GetString(*message, field);
      name_line = LineOfKey(text, field->json_name(), 1);
      if (name_line == 0) name_line = LineOfKey(text, field->name(), 1);
      break;
    }
    return {"ok " + std::string(kTypeUrlPrefix) + type_name + " " + std::to_string(name_line) +
            " " + Hex(name) + " " + Hex(value)};
  }

 private:
  pb::DescriptorPool pool_;
  pb::DynamicMessageFactory factory_;
  std::unique_ptr<pb::util::TypeResolver> resolver_;
};

int Run(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: uxds-json-to-proto DESCRIPTOR_SET\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream contents;
  if (in.is_open()) contents << in.rdbuf();
  pb::FileDescriptorSet files;
  if (!in.is_open() || !files.ParseFromString(contents.str())) {
    std::fprintf(stderr, "uxds-json-to-proto: %s: not a readable FileDescriptorSet\n", argv[1]);
    return 1;
  }
  Converter converter(files);
  std::string header;
  while (std::getline(std::cin, header)) {
    const size_t space = header.rfind(' ');
    size_t length = 0;
    bool valid = space != std::string::npos && space + 1 < header.size();
    for (size_t i = space + 1; valid && i < header.size(); ++i) {
      valid = header[i] >= '0' && header[i] <= '9' && length < kMaxRequestBytes;
      length = length * 10 + static_cast<size_t>(header[i] - '0');
    }
    if (!valid || length > kMaxRequestBytes) {
      // The framing is lost: say so and stop.
      std::cout << Error(0, "request header is not \"TYPES LENGTH\"").text << std::endl;
      return 1;
    }
    std::string text(length, '\0');
    std::cin.read(text.data(), static_cast<std::streamsize>(length));
    if (std::cin.gcount() != static_cast<std::streamsize>(length) || std::cin.get() != '\n') {
      std::cout << Error(0, "request shorter than its LENGTH").text << std::endl;
      return 1;
    }
    const Reply reply = converter.Convert(SplitCommas(header.substr(0, space)), text);
    std::cout << reply.text << std::endl;  // flushed: the tool waits for each reply
  }
  return 0;
}

}  // namespace
}  // namespace uxds::json_to_proto

int main(int argc, char** argv) { return uxds::json_to_proto::Run(argc, argv); }
