// Readers for proto fields that several resource types share, each reporting
// problems at the current field of a ValidationErrors with gRPC's texts.
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "envoy/config/core/v3/address.pb.h"
#include "envoy/type/v3/percent.pb.h"
#include "google/protobuf/duration.pb.h"
#include "xds/validation_errors.h"

namespace uxds {

// Parses `bytes` into `message`; false if they are not a valid encoding.
template <typename Message>
bool ParseProto(std::string_view bytes, Message& message) {
  return bytes.size() <= static_cast<size_t>(INT_MAX) &&
         message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// google.protobuf.Duration: seconds in [0, 315576000000], nanos in
// [0, 999999999]. Out-of-range parts are errors and read as clamped.
std::chrono::nanoseconds ParseDuration(const google::protobuf::Duration& duration,
                                       ValidationErrors& errors);

// A FractionalPercent as a rate per million, capped at 1000000. An unknown
// denominator is an error at ".denominator".
uint32_t ParseFractionPerMillion(const envoy::type::v3::FractionalPercent& fraction,
                                 ValidationErrors& errors);

// "ip:port" in canonical text ("10.0.0.1:443", "[2001:db8::1]:443"), or
// nullopt if `ip` is not an IPv4 or IPv6 literal.
std::optional<std::string> CanonicalIpPort(std::string_view ip, uint32_t port);

// "host:port" with brackets around an IPv6 literal host (gRPC's JoinHostPort).
std::string JoinHostPort(std::string_view host, uint32_t port);

// An endpoint's core.v3.Address (nullptr: absent): a socket_address with an
// IP literal and a port <= 65535. Returns the canonical "ip:port".
std::optional<std::string> ParseEndpointAddress(const envoy::config::core::v3::Address* address,
                                                ValidationErrors& errors);

}  // namespace uxds
