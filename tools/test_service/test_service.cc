#include "test_service/test_service.h"

#include <vector>

#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"

namespace uxds::test_service {
namespace {

constexpr std::string_view kEchoInitial = "x-grpc-test-echo-initial";
constexpr std::string_view kEchoTrailing = "x-grpc-test-echo-trailing-bin";

// Interop spec: echo these two request keys back as initial / trailing metadata.
void EchoInteropMetadata(ServerCall& call) {
  for (const auto& [key, value] : call.request_metadata()) {
    if (key == kEchoInitial) call.AddInitialMetadata(key, value);
    if (key == kEchoTrailing) call.AddTrailingMetadata(key, value);
  }
}

Status EchoStatusOf(const grpc::testing::EchoStatus& echo) {
  return Status(StatusCodeFromInt(echo.code()), echo.message());
}

Status BadRequest(std::string_view what) {
  return InvalidArgumentError("cannot parse " + std::string(what));
}

// A response payload size the client asked for: at most kMaxResponseSize
// bytes, so that a client cannot make the server allocate 2 GiB per call.
Status CheckResponseSize(int32_t size, std::string_view field) {
  if (size < 0) {
    return InvalidArgumentError(std::string(field) + " " + std::to_string(size) + " is negative");
  }
  if (static_cast<size_t>(size) > kMaxResponseSize) {
    return ResourceExhaustedError(std::string(field) + " " + std::to_string(size) +
                                  " exceeds the limit of " + std::to_string(kMaxResponseSize) +
                                  " bytes");
  }
  return OkStatus();
}

Task<Status> EmptyCall(ServerCall& call) {
  auto request = co_await call.Read();
  grpc::testing::Empty empty;
  if (!request || !empty.ParseFromString(*request)) co_return BadRequest("Empty");
  EchoInteropMetadata(call);
  co_return co_await call.Write(grpc::testing::Empty().SerializeAsString());
}

Task<Status> UnaryCall(ServerCall& call, const std::string& server_id,
                       const std::string& hostname) {
  auto bytes = co_await call.Read();
  grpc::testing::SimpleRequest request;
  if (!bytes || !request.ParseFromString(*bytes)) co_return BadRequest("SimpleRequest");
  EchoInteropMetadata(call);
  if (request.has_response_status() && request.response_status().code() != 0) {
    co_return EchoStatusOf(request.response_status());
  }
  grpc::testing::SimpleResponse response;
  if (Status checked = CheckResponseSize(request.response_size(), "response_size"); !checked.ok()) {
    co_return checked;
  }
  if (request.response_size() > 0) {
    response.mutable_payload()->set_body(
        std::string(static_cast<size_t>(request.response_size()), '\0'));
  }
  if (request.fill_server_id()) response.set_server_id(server_id);
  // What gRPC's xDS interop servers answer with every response.
  if (!hostname.empty()) response.set_hostname(hostname);
  co_return co_await call.Write(response.SerializeAsString());
}

Task<Status> WriteResponses(ServerCall& call,
                            const grpc::testing::StreamingOutputCallRequest& request) {
  // Every size is checked before the first response goes out.
  for (const auto& params : request.response_parameters()) {
    Status checked = CheckResponseSize(params.size(), "response_parameters.size");
    if (!checked.ok()) co_return checked;
  }
  for (const auto& params : request.response_parameters()) {
    grpc::testing::StreamingOutputCallResponse response;
    response.mutable_payload()->set_body(std::string(static_cast<size_t>(params.size()), '\0'));
    UXDS_CO_RETURN_IF_ERROR(co_await call.Write(response.SerializeAsString()));
  }
  co_return OkStatus();
}

Task<Status> StreamingOutputCall(ServerCall& call) {
  auto bytes = co_await call.Read();
  grpc::testing::StreamingOutputCallRequest request;
  if (!bytes || !request.ParseFromString(*bytes)) {
    co_return BadRequest("StreamingOutputCallRequest");
  }
  EchoInteropMetadata(call);
  UXDS_CO_RETURN_IF_ERROR(co_await WriteResponses(call, request));
  if (request.has_response_status()) co_return EchoStatusOf(request.response_status());
  co_return OkStatus();
}

// Reads every request, then answers once with the sum of their payload sizes.
Task<Status> StreamingInputCall(ServerCall& call) {
  EchoInteropMetadata(call);
  int32_t aggregated = 0;
  while (auto bytes = co_await call.Read()) {
    grpc::testing::StreamingInputCallRequest request;
    if (!request.ParseFromString(*bytes)) co_return BadRequest("StreamingInputCallRequest");
    aggregated += static_cast<int32_t>(request.payload().body().size());
  }
  grpc::testing::StreamingInputCallResponse response;
  response.set_aggregated_payload_size(aggregated);
  co_return co_await call.Write(response.SerializeAsString());
}

// Interop spec: buffers every request until the client half-closes, then
// answers them in order.
Task<Status> HalfDuplexCall(ServerCall& call) {
  EchoInteropMetadata(call);
  std::vector<grpc::testing::StreamingOutputCallRequest> requests;
  while (auto bytes = co_await call.Read()) {
    if (!requests.emplace_back().ParseFromString(*bytes)) {
      co_return BadRequest("StreamingOutputCallRequest");
    }
  }
  for (const auto& request : requests) {
    UXDS_CO_RETURN_IF_ERROR(co_await WriteResponses(call, request));
  }
  co_return OkStatus();
}

Task<Status> FullDuplexCall(ServerCall& call) {
  EchoInteropMetadata(call);
  while (auto bytes = co_await call.Read()) {
    grpc::testing::StreamingOutputCallRequest request;
    if (!request.ParseFromString(*bytes)) co_return BadRequest("StreamingOutputCallRequest");
    if (request.has_response_status() && request.response_status().code() != 0) {
      co_return EchoStatusOf(request.response_status());
    }
    UXDS_CO_RETURN_IF_ERROR(co_await WriteResponses(call, request));
  }
  co_return OkStatus();
}

}  // namespace

void RegisterTestService(ServiceRegistry& registry, std::string server_id, std::string hostname) {
  registry.Register(kEmptyCall, EmptyCall);
  registry.Register(kUnaryCall,
                    [server_id = std::move(server_id), hostname = std::move(hostname)](
                        ServerCall& call) { return UnaryCall(call, server_id, hostname); });
  registry.Register(kStreamingOutputCall, StreamingOutputCall);
  registry.Register(kStreamingInputCall, StreamingInputCall);
  registry.Register(kFullDuplexCall, FullDuplexCall);
  registry.Register(kHalfDuplexCall, HalfDuplexCall);
}

}  // namespace uxds::test_service
