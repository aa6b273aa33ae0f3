#include "xds/resources/xds_extension.h"

namespace uxds {
namespace {

constexpr std::string_view kXdsTypedStruct = "xds.type.v3.TypedStruct";
constexpr std::string_view kUdpaTypedStruct = "udpa.type.v1.TypedStruct";

// gRPC's rule: the type is what follows the last '/'. An empty URL stops the
// caller; a URL without a usable '/' is an error but is read as is.
bool StripTypePrefix(std::string_view type_url, ValidationErrors& errors, std::string& type) {
  auto field = errors.Scope(".type_url");
  if (type_url.empty()) {
    errors.Add("field not present");
    return false;
  }
  size_t slash = type_url.rfind('/');
  if (slash == std::string_view::npos || slash == type_url.size() - 1) {
    errors.Add("invalid value \"" + std::string(type_url) + "\"");
    type = std::string(type_url);
  } else {
    type = std::string(type_url.substr(slash + 1));
  }
  return true;
}

}  // namespace

bool ExtractXdsExtension(const google::protobuf::Any* any, ValidationErrors& errors,
                         XdsExtension& out) {
  if (any == nullptr) {
    errors.Add("field not present");
    return false;
  }
  if (!StripTypePrefix(any->type_url(), errors, out.type)) return false;
  out.value_scope.emplace(&errors, ".value[" + out.type + "]");
  out.serialized_value = any->value();
  if (out.type != kXdsTypedStruct && out.type != kUdpaTypedStruct) return true;
  // Both TypedStructs have the same fields and numbers.
  out.typed_struct.emplace();
  if (!out.typed_struct->ParseFromString(any->value())) {
    errors.Add("could not parse");
    return false;
  }
  if (!StripTypePrefix(out.typed_struct->type_url(), errors, out.type)) return false;
  out.typed_struct_value_scope.emplace(&errors, ".value[" + out.type + "]");
  out.serialized_value = {};
  return true;
}

}  // namespace uxds
