// libFuzzer target: DecodeListener() on arbitrary bytes (see resource_fuzz_support.h
// for the properties checked), plus what validation promises for this type.
#include "resource_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uxds::fuzzing::FuzzDecode(
      [](const uxds::XdsDecodeContext& context, std::string_view bytes) {
        return uxds::DecodeListener(context, bytes);
      },
      [](const uxds::ListenerResource& resource) {
        const auto* tcp = std::get_if<uxds::ListenerResource::TcpListener>(&resource.listener);
        if (tcp == nullptr) return;
        uxds::fuzzing::Require(!tcp->filter_chains.empty() ||
                               tcp->default_filter_chain.has_value());
        for (const auto& destination : tcp->filter_chain_map.destination_ips) {
          for (const auto& sources : destination.source_types) {
            for (const auto& source : sources) {
              for (const auto& [port, chain] : source.ports) {
                uxds::fuzzing::Require(chain < tcp->filter_chains.size());
                uxds::fuzzing::Require(
                    !tcp->filter_chains[chain].filter_chain_match.NeverMatches());
              }
            }
          }
        }
      },
      data, size);
}
