#include "xds/resources/fault_filter.h"

#include <string>

#include "envoy/extensions/filters/http/fault/v3/fault.pb.h"
#include "xds/resources/field_parsers.h"

namespace uxds {
namespace {

// gRPC reads an unknown denominator as HUNDRED, the proto's default.
FaultInjectionConfig::Fraction ParseFraction(const envoy::type::v3::FractionalPercent& percent) {
  FaultInjectionConfig::Fraction fraction;
  fraction.numerator = percent.numerator();
  switch (percent.denominator()) {
    case envoy::type::v3::FractionalPercent::TEN_THOUSAND:
      fraction.denominator = 10000;
      break;
    case envoy::type::v3::FractionalPercent::MILLION:
      fraction.denominator = 1000000;
      break;
    default:
      fraction.denominator = 100;
      break;
  }
  return fraction;
}

ResourceJson FractionJson(const FaultInjectionConfig::Fraction& fraction) {
  return {{"numerator", fraction.numerator}, {"denominator", fraction.denominator}};
}

}  // namespace

HttpFilterConfig ParseFaultFilterConfig(const XdsExtension& extension, ValidationErrors& errors) {
  HttpFilterConfig config{.config_type = std::string(kFaultConfigType)};
  envoy::extensions::filters::http::fault::v3::HTTPFault proto;
  if (extension.typed_struct.has_value() || !ParseProto(extension.serialized_value, proto)) {
    errors.Add("could not parse fault injection filter config");
    return config;
  }
  FaultInjectionConfig fault;
  if (proto.has_abort()) {
    auto field = errors.Scope(".abort");
    const auto& abort = proto.abort();
    FaultInjectionConfig::Abort parsed;
    parsed.grpc_status = abort.grpc_status();
    parsed.http_status = abort.http_status();
    parsed.from_headers = abort.has_header_abort();
    if (parsed.grpc_status > 16) {
      auto status_field = errors.Scope(".grpc_status");
      errors.Add("invalid gRPC status code: " + std::to_string(parsed.grpc_status));
    }
    if (abort.has_percentage()) parsed.percentage = ParseFraction(abort.percentage());
    fault.abort = parsed;
  }
  if (proto.has_delay()) {
    auto field = errors.Scope(".delay");
    const auto& delay = proto.delay();
    FaultInjectionConfig::Delay parsed;
    if (delay.has_fixed_delay()) {
      auto delay_field = errors.Scope(".fixed_delay");
      parsed.fixed_delay = ParseDuration(delay.fixed_delay(), errors);
    }
    parsed.from_headers = delay.has_header_delay();
    if (delay.has_percentage()) parsed.percentage = ParseFraction(delay.percentage());
    fault.delay = parsed;
  }
  if (proto.has_max_active_faults()) fault.max_active_faults = proto.max_active_faults().value();
  config.fault = fault;
  return config;
}

ResourceJson FaultInjectionJson(const FaultInjectionConfig& config) {
  ResourceJson json = ResourceJson::object();
  if (config.abort.has_value()) {
    const auto& abort = *config.abort;
    ResourceJson entry;
    if (abort.grpc_status != 0) entry["grpc_status"] = abort.grpc_status;
    if (abort.http_status != 0) entry["http_status"] = abort.http_status;
    if (abort.from_headers) entry["header_abort"] = true;
    entry["percentage"] = FractionJson(abort.percentage);
    json["abort"] = entry;
  }
  if (config.delay.has_value()) {
    const auto& delay = *config.delay;
    ResourceJson entry;
    if (delay.from_headers) {
      entry["header_delay"] = true;
    } else {
      entry["fixed_delay"] = DurationJson(delay.fixed_delay);
    }
    entry["percentage"] = FractionJson(delay.percentage);
    json["delay"] = entry;
  }
  if (config.max_active_faults.has_value()) json["max_active_faults"] = *config.max_active_faults;
  return json;
}

}  // namespace uxds
