#include "support/ads_request_rules.h"

#include <set>
#include <string>
#include <vector>

namespace uxds::testing {

void AdsRequestRules::ResponseSent(int64_t stream, const std::string& type_url,
                                   const std::string& version_info, const std::string& nonce) {
  streams_[stream].nonces[type_url].insert(nonce);
  versions_[type_url].insert(version_info);
}

std::vector<std::string> AdsRequestRules::Check(int64_t stream, const AdsRequestFacts& request) {
  StreamRecord& record = streams_[stream];
  std::vector<std::string> violations;
  const bool first_of_stream = record.requests == 0;
  ++record.requests;
  if (first_of_stream && !request.has_node) {
    violations.push_back("the first request of the stream has no node");
  }
  if (!first_of_stream && request.has_node) {
    violations.push_back("a node in a request that is not the first of the stream");
  }
  if (record.types.insert(request.type_url).second && request.resource_names.empty()) {
    violations.push_back("the first request of the type has no resource names (wildcard)");
  }
  std::set<std::string> seen;
  bool empty_name = false;
  bool repeated = false;
  for (const std::string& name : request.resource_names) {
    if (name.empty()) empty_name = true;
    if (!seen.insert(name).second) repeated = true;
  }
  if (empty_name) violations.push_back("an empty resource name");
  if (repeated) violations.push_back("repeated resource names");
  if (!request.response_nonce.empty()) {
    auto sent = record.nonces.find(request.type_url);
    if (sent == record.nonces.end() || sent->second.count(request.response_nonce) == 0) {
      violations.push_back("response_nonce '" + request.response_nonce +
                           "' was not sent for this type on this stream");
    }
  }
  if (!request.version_info.empty()) {
    auto sent = versions_.find(request.type_url);
    if (sent == versions_.end() || sent->second.count(request.version_info) == 0) {
      violations.push_back("version_info '" + request.version_info +
                           "' was never sent for this type");
    }
  }
  for (std::string& violation : violations) {
    violation = "stream " + std::to_string(stream) + ", " + request.type_url + ": " + violation;
  }
  return violations;
}

}  // namespace uxds::testing
