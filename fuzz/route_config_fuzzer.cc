// libFuzzer target: DecodeRouteConfig() on arbitrary bytes (see resource_fuzz_support.h
// for the properties checked), plus what validation promises for this type.
#include "resource_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uxds::fuzzing::FuzzDecode(
      [](const uxds::XdsDecodeContext& context, std::string_view bytes) {
        return uxds::DecodeRouteConfig(context, bytes);
      },
      [](const uxds::RouteConfigResource& resource) {
        for (const auto& vhost : resource.virtual_hosts) {
          uxds::fuzzing::Require(!vhost.domains.empty());
          for (const auto& domain : vhost.domains) {
            // Every valid domain pattern is found by itself.
            if (domain.find('*') == std::string::npos) {
              uxds::fuzzing::Require(resource.FindVirtualHost(domain) != nullptr);
            }
          }
          for (const auto& route : vhost.routes) {
            const auto* action =
                std::get_if<uxds::RouteConfigResource::Route::RouteAction>(&route.action);
            if (action == nullptr) continue;
            using WeightedClusters =
                uxds::RouteConfigResource::Route::RouteAction::WeightedClusters;
            if (const auto* weighted = std::get_if<WeightedClusters>(&action->cluster)) {
              uxds::fuzzing::Require(!weighted->clusters.empty());
            }
          }
        }
      },
      data, size);
}
