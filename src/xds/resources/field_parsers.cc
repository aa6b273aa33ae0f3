#include "xds/resources/field_parsers.h"

#include <arpa/inet.h>

#include <algorithm>

namespace uxds {

std::chrono::nanoseconds ParseDuration(const google::protobuf::Duration& duration,
                                       ValidationErrors& errors) {
  // The range of google.protobuf.Duration (10000 years). Int64 nanoseconds
  // reach only 292 years, so longer durations saturate.
  constexpr int64_t kMaxSeconds = 315576000000;
  int64_t seconds = duration.seconds();
  if (seconds < 0 || seconds > kMaxSeconds) {
    auto field = errors.Scope(".seconds");
    errors.Add("value must be in the range [0, 315576000000]");
    seconds = std::clamp<int64_t>(seconds, 0, kMaxSeconds);
  }
  int32_t nanos = duration.nanos();
  if (nanos < 0 || nanos > 999999999) {
    auto field = errors.Scope(".nanos");
    errors.Add("value must be in the range [0, 999999999]");
    nanos = std::clamp<int32_t>(nanos, 0, 999999999);
  }
  constexpr int64_t kMaxWholeSeconds = std::chrono::nanoseconds::max().count() / 1000000000 - 1;
  if (seconds > kMaxWholeSeconds) return std::chrono::nanoseconds::max();
  return std::chrono::seconds(seconds) + std::chrono::nanoseconds(nanos);
}

uint32_t ParseFractionPerMillion(const envoy::type::v3::FractionalPercent& fraction,
                                 ValidationErrors& errors) {
  uint64_t numerator = fraction.numerator();
  switch (fraction.denominator()) {
    case envoy::type::v3::FractionalPercent::HUNDRED:
      numerator *= 10000;
      break;
    case envoy::type::v3::FractionalPercent::TEN_THOUSAND:
      numerator *= 100;
      break;
    case envoy::type::v3::FractionalPercent::MILLION:
      break;
    default: {
      auto field = errors.Scope(".denominator");
      errors.Add("unknown denominator type");
      break;
    }
  }
  // 64-bit arithmetic: gRPC multiplies in 32 bits and can wrap; a rate is
  // never more than everything.
  return static_cast<uint32_t>(std::min<uint64_t>(numerator, 1000000));
}

std::optional<std::string> CanonicalIpPort(std::string_view ip, uint32_t port) {
  std::string host(ip);
  char text[INET6_ADDRSTRLEN] = {};
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    inet_ntop(AF_INET, &v4, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(port);
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    inet_ntop(AF_INET6, &v6, text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  return std::nullopt;
}

std::string JoinHostPort(std::string_view host, uint32_t port) {
  if (host.find(':') != std::string_view::npos) {
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::optional<std::string> ParseEndpointAddress(const envoy::config::core::v3::Address* address,
                                                ValidationErrors& errors) {
  if (address == nullptr) {
    errors.Add("field not present");
    return std::nullopt;
  }
  auto socket_field = errors.Scope(".socket_address");
  if (!address->has_socket_address()) {
    errors.Add("field not present");
    return std::nullopt;
  }
  const auto& socket_address = address->socket_address();
  const uint32_t port = socket_address.port_value();
  if (port > 65535) {
    auto field = errors.Scope(".port_value");
    errors.Add("invalid port");
    return std::nullopt;
  }
  auto canonical = CanonicalIpPort(socket_address.address(), port);
  if (!canonical.has_value()) {
    errors.Add("Failed to parse address:" + socket_address.address());
  }
  return canonical;
}

}  // namespace uxds
