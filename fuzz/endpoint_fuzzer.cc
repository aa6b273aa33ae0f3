// libFuzzer target: DecodeEndpoints() on arbitrary bytes (see resource_fuzz_support.h
// for the properties checked), plus what validation promises for this type.
#include "resource_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uxds::fuzzing::FuzzDecode(
      [](const uxds::XdsDecodeContext& context, std::string_view bytes) {
        return uxds::DecodeEndpoints(context, bytes);
      },
      [](const uxds::EndpointResource& resource) {
        for (const auto& priority : resource.priorities) {
          uxds::fuzzing::Require(!priority.localities.empty());
          uint64_t total = 0;
          for (size_t i = 0; i < priority.localities.size(); ++i) {
            const auto& locality = priority.localities[i];
            uxds::fuzzing::Require(locality.weight > 0);
            uxds::fuzzing::Require(i == 0 || priority.localities[i - 1].name < locality.name);
            total += locality.weight;
            for (const auto& endpoint : locality.endpoints) {
              uxds::fuzzing::Require(endpoint.weight > 0 && !endpoint.addresses.empty());
            }
          }
          uxds::fuzzing::Require(total <= UINT32_MAX);
        }
        for (const auto& drop : resource.drop_overloads) {
          uxds::fuzzing::Require(drop.requests_per_million <= 1000000);
        }
      },
      data, size);
}
