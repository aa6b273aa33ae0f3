// The trimmed protos must put every field at upstream's number: a control
// plane built from envoy's own protos (or grpcio's) reads and writes these
// bytes. The wire format is decoded by hand here, independently of the
// generated code, for the fields newer than most published copies (TP3's
// resource_errors, A71's client_scope, A88's cache states).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/admin/v3/config_dump_shared.pb.h"
#include "envoy/config/core/v3/base.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "envoy/service/status/v3/csds.pb.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/rpc/status.pb.h"

namespace {

using envoy::service::discovery::v3::DiscoveryRequest;
using envoy::service::discovery::v3::DiscoveryResponse;
using envoy::service::status::v3::ClientConfig;

// One field of a serialized message, as the protobuf wire format has it.
struct WireField {
  uint32_t number = 0;
  uint32_t wire_type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t varint = 0;     // wire type 0
  std::string_view bytes;  // wire type 2
};

std::optional<uint64_t> ReadVarint(std::string_view& in) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

// Splits a message into its top-level fields; nullopt if malformed.
std::optional<std::vector<WireField>> DecodeFields(std::string_view in) {
  std::vector<WireField> fields;
  while (!in.empty()) {
    auto key = ReadVarint(in);
    if (!key) return std::nullopt;
    WireField field;
    field.number = static_cast<uint32_t>(*key >> 3);
    field.wire_type = static_cast<uint32_t>(*key & 7);
    switch (field.wire_type) {
      case 0: {
        auto v = ReadVarint(in);
        if (!v) return std::nullopt;
        field.varint = *v;
        break;
      }
      case 1:
      case 5: {
        const size_t n = field.wire_type == 1 ? 8 : 4;
        if (in.size() < n) return std::nullopt;
        in.remove_prefix(n);
        break;
      }
      case 2: {
        auto len = ReadVarint(in);
        if (!len || *len > in.size()) return std::nullopt;
        field.bytes = in.substr(0, *len);
        in.remove_prefix(*len);
        break;
      }
      default:
        return std::nullopt;
    }
    fields.push_back(field);
  }
  return fields;
}

std::vector<WireField> FieldsNumbered(const std::vector<WireField>& fields, uint32_t number) {
  std::vector<WireField> out;
  for (const auto& f : fields) {
    if (f.number == number) out.push_back(f);
  }
  return out;
}

DiscoveryResponse MakeResponseWithErrors() {
  DiscoveryResponse response;
  response.set_version_info("v7");
  response.set_type_url("type.googleapis.com/envoy.config.listener.v3.Listener");
  response.set_nonce("n1");
  response.mutable_control_plane()->set_identifier("cp-a");
  auto* any = response.add_resources();
  any->set_type_url("type.googleapis.com/envoy.config.listener.v3.Listener");
  any->set_value("opaque-listener-bytes");
  auto* missing = response.add_resource_errors();
  missing->mutable_resource_name()->set_name("listener-missing");
  missing->mutable_error_detail()->set_code(5);  // NOT_FOUND
  missing->mutable_error_detail()->set_message("no such listener");
  auto* denied = response.add_resource_errors();
  denied->mutable_resource_name()->set_name("listener-denied");
  denied->mutable_error_detail()->set_code(7);  // PERMISSION_DENIED
  return response;
}

TEST(ProtoTest, DiscoveryResponseResourceErrorsRoundTrip) {
  const std::string bytes = MakeResponseWithErrors().SerializeAsString();
  DiscoveryResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.version_info(), "v7");
  EXPECT_EQ(parsed.nonce(), "n1");
  EXPECT_EQ(parsed.control_plane().identifier(), "cp-a");
  ASSERT_EQ(parsed.resources_size(), 1);
  EXPECT_EQ(parsed.resources(0).value(), "opaque-listener-bytes");
  ASSERT_EQ(parsed.resource_errors_size(), 2);
  EXPECT_EQ(parsed.resource_errors(0).resource_name().name(), "listener-missing");
  EXPECT_EQ(parsed.resource_errors(0).error_detail().code(), 5);
  EXPECT_EQ(parsed.resource_errors(0).error_detail().message(), "no such listener");
  EXPECT_EQ(parsed.resource_errors(1).resource_name().name(), "listener-denied");
  EXPECT_EQ(parsed.resource_errors(1).error_detail().code(), 7);
}

TEST(ProtoTest, ResourceErrorsAreFieldSevenOnTheWire) {
  const std::string bytes = MakeResponseWithErrors().SerializeAsString();
  auto fields = DecodeFields(bytes);
  ASSERT_TRUE(fields.has_value());
  // TP3 / upstream discovery.proto: DiscoveryResponse.resource_errors = 7.
  auto errors = FieldsNumbered(*fields, 7);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].wire_type, 2u);
  // ResourceError { ResourceName resource_name = 1; google.rpc.Status error_detail = 2; }
  auto error_fields = DecodeFields(errors[0].bytes);
  ASSERT_TRUE(error_fields.has_value());
  auto name = FieldsNumbered(*error_fields, 1);
  ASSERT_EQ(name.size(), 1u);
  auto name_fields = DecodeFields(name[0].bytes);  // ResourceName { string name = 1; }
  ASSERT_TRUE(name_fields.has_value());
  ASSERT_EQ(name_fields->size(), 1u);
  EXPECT_EQ((*name_fields)[0].number, 1u);
  EXPECT_EQ((*name_fields)[0].bytes, "listener-missing");
  auto detail = FieldsNumbered(*error_fields, 2);
  ASSERT_EQ(detail.size(), 1u);
  auto status_fields = DecodeFields(detail[0].bytes);  // Status { code = 1; message = 2; }
  ASSERT_TRUE(status_fields.has_value());
  auto code = FieldsNumbered(*status_fields, 1);
  ASSERT_EQ(code.size(), 1u);
  EXPECT_EQ(code[0].wire_type, 0u);
  EXPECT_EQ(code[0].varint, 5u);
  auto message = FieldsNumbered(*status_fields, 2);
  ASSERT_EQ(message.size(), 1u);
  EXPECT_EQ(message[0].bytes, "no such listener");
  // The other fields keep upstream's numbers too.
  EXPECT_EQ(FieldsNumbered(*fields, 1)[0].bytes, "v7");  // version_info
  EXPECT_EQ(FieldsNumbered(*fields, 2).size(), 1u);      // resources
  EXPECT_EQ(FieldsNumbered(*fields, 5)[0].bytes, "n1");  // nonce
  EXPECT_EQ(FieldsNumbered(*fields, 6).size(), 1u);      // control_plane
}

TEST(ProtoTest, NackRequestCarriesErrorDetailAsFieldSix) {
  DiscoveryRequest request;
  request.set_version_info("v6");
  request.add_resource_names("a");
  request.add_resource_names("b");
  request.set_response_nonce("n1");
  request.mutable_error_detail()->set_code(3);
  request.mutable_node()->set_id("node-1");
  request.mutable_node()->set_user_agent_version("0.1.0");
  const std::string bytes = request.SerializeAsString();  // fields point into it
  auto fields = DecodeFields(bytes);
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(FieldsNumbered(*fields, 3).size(), 2u);      // resource_names
  EXPECT_EQ(FieldsNumbered(*fields, 5)[0].bytes, "n1");  // response_nonce
  ASSERT_EQ(FieldsNumbered(*fields, 6).size(), 1u);      // error_detail
  auto node = FieldsNumbered(*fields, 2);                // node
  ASSERT_EQ(node.size(), 1u);
  auto node_fields = DecodeFields(node[0].bytes);
  ASSERT_TRUE(node_fields.has_value());
  EXPECT_EQ(FieldsNumbered(*node_fields, 1)[0].bytes, "node-1");  // id
  EXPECT_EQ(FieldsNumbered(*node_fields, 7)[0].bytes, "0.1.0");   // user_agent_version
}

ClientConfig MakeClientConfig() {
  ClientConfig config;
  config.mutable_node()->set_id("node-1");
  config.set_client_scope("xds:///service.example.com");
  auto* entry = config.add_generic_xds_configs();
  entry->set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  entry->set_name("cluster-1");
  entry->set_version_info("3");
  entry->set_client_status(envoy::admin::v3::RECEIVED_ERROR);
  entry->mutable_error_state()->set_details("permission denied by control plane");
  entry->mutable_last_updated()->set_seconds(1700000000);
  entry->set_is_static_resource(false);
  return config;
}

TEST(ProtoTest, ClientConfigRoundTrip) {
  ClientConfig parsed;
  ASSERT_TRUE(parsed.ParseFromString(MakeClientConfig().SerializeAsString()));
  EXPECT_EQ(parsed.node().id(), "node-1");
  EXPECT_EQ(parsed.client_scope(), "xds:///service.example.com");
  ASSERT_EQ(parsed.generic_xds_configs_size(), 1);
  const auto& entry = parsed.generic_xds_configs(0);
  EXPECT_EQ(entry.name(), "cluster-1");
  EXPECT_EQ(entry.version_info(), "3");
  EXPECT_EQ(entry.client_status(), envoy::admin::v3::RECEIVED_ERROR);
  EXPECT_EQ(entry.error_state().details(), "permission denied by control plane");
  EXPECT_EQ(entry.last_updated().seconds(), 1700000000);
}

TEST(ProtoTest, ClientScopeIsFieldFourOnTheWire) {
  const std::string bytes = MakeClientConfig().SerializeAsString();  // fields point into it
  auto fields = DecodeFields(bytes);
  ASSERT_TRUE(fields.has_value());
  // A71 / upstream csds.proto: ClientConfig.client_scope = 4.
  auto scope = FieldsNumbered(*fields, 4);
  ASSERT_EQ(scope.size(), 1u);
  EXPECT_EQ(scope[0].wire_type, 2u);
  EXPECT_EQ(scope[0].bytes, "xds:///service.example.com");
  // generic_xds_configs = 3, and inside it client_status = 7 with the A88
  // value RECEIVED_ERROR = 5.
  auto configs = FieldsNumbered(*fields, 3);
  ASSERT_EQ(configs.size(), 1u);
  auto entry_fields = DecodeFields(configs[0].bytes);
  ASSERT_TRUE(entry_fields.has_value());
  auto status = FieldsNumbered(*entry_fields, 7);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].varint, 5u);
  EXPECT_EQ(FieldsNumbered(*entry_fields, 2)[0].bytes, "cluster-1");  // name
  EXPECT_EQ(FieldsNumbered(*entry_fields, 8).size(), 1u);             // error_state
}

TEST(ProtoTest, ClientResourceStatusNumbersMatchUpstream) {
  EXPECT_EQ(envoy::admin::v3::UNKNOWN, 0);
  EXPECT_EQ(envoy::admin::v3::REQUESTED, 1);
  EXPECT_EQ(envoy::admin::v3::DOES_NOT_EXIST, 2);
  EXPECT_EQ(envoy::admin::v3::ACKED, 3);
  EXPECT_EQ(envoy::admin::v3::NACKED, 4);
  EXPECT_EQ(envoy::admin::v3::RECEIVED_ERROR, 5);
  EXPECT_EQ(envoy::admin::v3::TIMEOUT, 6);
}

TEST(ProtoTest, UnknownUpstreamFieldsSurviveARoundTrip) {
  // A full envoy DiscoveryRequest may carry resource_locators (7), which the
  // trimmed proto omits: the bytes must be kept, not dropped or rejected.
  std::string bytes = DiscoveryRequest().SerializeAsString();
  bytes += std::string("\x3a\x03\x0a\x01x", 5);  // field 7, length 3: { name: "x" }
  DiscoveryRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.SerializeAsString(), bytes);
}

}  // namespace
