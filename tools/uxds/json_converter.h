// JsonConverter: proto3 JSON -> serialized protobuf, through the
// uxds-json-to-proto program (tools/json_to_proto/) run as a child process.
//
// The library and this binary link protobuf-lite, whose generated code has
// no JSON parser and no descriptors; full libprotobuf has both, but its
// well-known types clash with the library's lite copies in one binary, so
// the parser lives in a program of its own, fed over a pipe.
//
// The converter and the descriptor set of uxds's protos are looked for in
// this order: the environment (UXDS_JSON_TO_PROTO, UXDS_RESOURCE_DESCRIPTORS),
// next to the running binary, where the build tree puts them, and where
// `meson install` puts them (libexecdir/uxds, datadir/uxds).
//
// Blocking (it waits for the child's answer): never call it on a loop thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/subprocess.h"
#include "uxds/status.h"

namespace uxds::tool {

inline constexpr std::string_view kTypeUrlPrefix = "type.googleapis.com/";

// One message read from JSON text.
struct ConvertedMessage {
  std::string type_url;  // "type.googleapis.com/envoy.config.listener.v3.Listener"
  std::string name;      // its name (cluster_name for an EDS resource); may be empty
  size_t name_line = 0;  // the line of the name's key in the text; 0 if absent
  std::string value;     // the serialized message
};

// Why the text is not such a message, and where.
struct JsonTextError {
  size_t line = 0;  // 1-based; 0 when no line applies
  std::string message;
};

class JsonConverter {
 public:
  // The converter's answer: the message, or the text's error.
  using Result = std::variant<ConvertedMessage, JsonTextError>;

  // `message_types`: full names (envoy.config.listener.v3.Listener) the text
  // may hold. With a top-level "@type" the text names its own (one of them);
  // without, there must be exactly one.
  explicit JsonConverter(std::vector<std::string> message_types);

  // The message in `text`, or its error; a failed converter (not found,
  // crashed, no answer) is an error Status naming it. A converter that died
  // is started again on the next call.
  StatusOr<Result> Convert(std::string_view text);

 private:
  Status Start();

  const std::string types_list_;  // comma-separated
  std::optional<Subprocess> child_;
  std::string command_;  // for messages
};

// Where the converter program and the descriptor set are (see above); an
// error naming every place looked at when one is missing.
StatusOr<std::string> FindJsonToProtoProgram();
StatusOr<std::string> FindResourceDescriptorSet();

}  // namespace uxds::tool
