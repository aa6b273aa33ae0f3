// AdsRequestRules: the rules every State-of-the-World DiscoveryRequest a
// client sends must keep, as tests/peers/ads_request_checker.py checks them
// in the fake control plane, for servers written in C++ (the XdsClient
// fuzzer's in-process ADS server).
//
// The rules (xDS protocol, "ACK/NACK and resource type instance version" and
// "How the client specifies what resources to return"; NOTES "ACK / NACK"):
//  - the first request of a stream carries the node, later ones do not;
//  - the first request of a type on a stream names resources: an empty
//    resource_names list there is the legacy wildcard, which asks for every
//    resource of the type;
//  - resource_names holds no empty and no repeated name;
//  - a non-empty response_nonce is one the server sent for that type on that
//    stream;
//  - a non-empty version_info is one the server sent for that type (the
//    client keeps its accepted version across streams).
//
// Plain data in, violations out: no protobuf, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace uxds::testing {

// The fields of one DiscoveryRequest the rules read.
struct AdsRequestFacts {
  std::string type_url;
  std::string version_info;
  std::vector<std::string> resource_names;
  std::string response_nonce;
  bool has_node = false;
};

class AdsRequestRules {
 public:
  // The server sent a DiscoveryResponse on `stream`.
  void ResponseSent(int64_t stream, const std::string& type_url, const std::string& version_info,
                    const std::string& nonce);
  // The rules `request`, received on `stream`, breaks, as text (empty if
  // none). Stream ids are never reused.
  std::vector<std::string> Check(int64_t stream, const AdsRequestFacts& request);

 private:
  struct StreamRecord {
    int64_t requests = 0;
    std::set<std::string> types;                          // type URLs requested
    std::map<std::string, std::set<std::string>> nonces;  // by type URL
  };
  std::map<int64_t, StreamRecord> streams_;
  std::map<std::string, std::set<std::string>> versions_;  // by type URL, any stream
};

}  // namespace uxds::testing
