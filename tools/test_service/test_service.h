// grpc.testing.TestService (grpc-proto's test.proto) on the uxds HTTP/2
// server: what the demo serves and what interop tests and benches call, so
// that the standard gRPC interop clients can talk to a uxds server.
#pragma once

#include <cstddef>
#include <string>

#include "uxds/service_registry.h"

namespace uxds::test_service {

inline constexpr const char* kEmptyCall = "/grpc.testing.TestService/EmptyCall";
inline constexpr const char* kUnaryCall = "/grpc.testing.TestService/UnaryCall";
inline constexpr const char* kStreamingOutputCall = "/grpc.testing.TestService/StreamingOutputCall";
inline constexpr const char* kStreamingInputCall = "/grpc.testing.TestService/StreamingInputCall";
inline constexpr const char* kFullDuplexCall = "/grpc.testing.TestService/FullDuplexCall";
inline constexpr const char* kHalfDuplexCall = "/grpc.testing.TestService/HalfDuplexCall";

// The largest response payload a call may ask for (response_size,
// response_parameters.size): 4 MiB, gRPC's default receive limit. A larger
// one fails the call with RESOURCE_EXHAUSTED naming the limit, a negative
// one with INVALID_ARGUMENT, before anything is allocated.
inline constexpr size_t kMaxResponseSize = 4 * 1024 * 1024;

// Registers EmptyCall, UnaryCall, StreamingOutputCall, StreamingInputCall
// (answers aggregated_payload_size), FullDuplexCall and HalfDuplexCall
// (answers once the client half-closes).
// UnaryCall and FullDuplexCall honor response_size / response_parameters,
// response_status and fill_server_id (`server_id`), and echo the interop
// metadata keys x-grpc-test-echo-initial / x-grpc-test-echo-trailing-bin.
// UnaryCall fills SimpleResponse.hostname with `hostname` when it is set, as
// gRPC's xDS interop servers do.
void RegisterTestService(ServiceRegistry& registry, std::string server_id,
                         std::string hostname = "");

}  // namespace uxds::test_service
