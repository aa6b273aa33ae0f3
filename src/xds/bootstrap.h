// Bootstrap pieces the xDS client needs beyond the public structs
// (include/uxds/bootstrap.h): the Node proto sent to control planes and
// reported by CSDS, and the checks shared by the JSON parser and
// Bootstrap::Validate().
#pragma once

#include <string_view>

#include "envoy/config/core/v3/base.pb.h"
#include "google/protobuf/struct.pb.h"
#include "uxds/bootstrap.h"
#include "xds/validation_errors.h"

namespace uxds {

// Fills id, cluster, locality (only if any part is set), metadata and the
// user agent. Client features are the caller's: they describe the client, not
// the bootstrap.
void PopulateNodeProto(const XdsNode& node, std::string_view user_agent_name,
                       std::string_view user_agent_version, envoy::config::core::v3::Node* proto);

void JsonValueToProto(const JsonValue& json, google::protobuf::Value* proto);
void JsonObjectToProto(const JsonValue::Object& json, google::protobuf::Struct* proto);

}  // namespace uxds

namespace uxds::bootstrap_internal {

// Checks shared by the JSON parser and Bootstrap::Validate(). Each reports
// at the current field of `errors`, which the caller has scoped.

// At a server (xds_servers[i]): server_uri set, credentials usable.
void CheckXdsServer(const XdsServerConfig& server, ValidationErrors& errors);
// At tls credentials: a credential file named in `field` opens and is not
// empty (no error for an empty path).
void CheckReadableFile(std::string_view field, const std::string& path, ValidationErrors& errors);
// At tls credentials: certificate_file and private_key_file go together.
void CheckTlsCertificatePair(bool has_certificate_file, bool has_private_key_file,
                             ValidationErrors& errors);
// At authorities["<name>"].client_listener_resource_name_template (A47).
void CheckAuthorityListenerTemplate(std::string_view authority_name, std::string_view name_template,
                                    ValidationErrors& errors);

}  // namespace uxds::bootstrap_internal
