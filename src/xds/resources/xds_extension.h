// The typed config inside a google.protobuf.Any (filters, LB policies,
// cluster types, listeners' HttpConnectionManager), with gRPC's handling of
// TypedStruct: when the Any holds a udpa.type.v1.TypedStruct or an
// xds.type.v3.TypedStruct, the type is the one the TypedStruct names (A39,
// A36) and the value is its Struct.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "google/protobuf/any.pb.h"
#include "xds/type/v3/typed_struct.pb.h"
#include "xds/validation_errors.h"

namespace uxds {

struct XdsExtension {
  // Full message name without the "type.googleapis.com/" prefix, e.g.
  // "envoy.extensions.filters.http.router.v3.Router".
  std::string type;
  // The serialized message, unless the config came as a TypedStruct.
  std::string_view serialized_value;
  // Set when the config came as a TypedStruct: its fields as a Struct.
  std::optional<xds::type::v3::TypedStruct> typed_struct;

  // While the extension lives, errors land under
  // "<field>.value[<type>]" (and ".value[<inner type>]" for a TypedStruct),
  // which is how gRPC names fields inside an Any. Declared last: destroyed
  // first, inner scope before outer.
  std::optional<ValidationErrors::ScopedField> value_scope;
  std::optional<ValidationErrors::ScopedField> typed_struct_value_scope;
};

// Reads `any` (nullptr: the field is absent) at the current field of
// `errors`. False, with the error recorded, if there is nothing to look at;
// true otherwise (a malformed type URL is still an error, but the type is
// read as sent). `out` must be constructed after every scope that is open
// now and die before them (declare it right before the call).
bool ExtractXdsExtension(const google::protobuf::Any* any, ValidationErrors& errors,
                         XdsExtension& out);

}  // namespace uxds
