#include "demo_steps.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace uxds::tool {
namespace {

constexpr char kUnaryCall[] = "/grpc.testing.TestService/UnaryCall";
constexpr std::chrono::milliseconds kCallTimeout{10'000};

}  // namespace

ProgressLine::ProgressLine() : enabled_(isatty(STDERR_FILENO) == 1) {}

void ProgressLine::Show(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K  %s", text.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::Clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

int CallTally::AnsweredBy(const std::vector<DemoEndpoint>& servers) const {
  int answered = 0;
  for (const DemoEndpoint& server : servers) {
    auto it = per_server.find(server.name);
    if (it != per_server.end()) answered += it->second;
  }
  return answered;
}

std::string CallTally::Spread(const std::vector<DemoEndpoint>& servers) const {
  std::string text;
  for (const DemoEndpoint& server : servers) {
    auto it = per_server.find(server.name);
    if (!text.empty()) text += ", ";
    text += server.name + " " + std::to_string(it == per_server.end() ? 0 : it->second);
  }
  return text;
}

DemoClient::DemoClient(Channel& channel, const DemoConfig& config, ProgressLine& progress)
    : channel_(channel), config_(config), progress_(progress) {}

std::vector<DemoEndpoint> DemoClient::Priority(uint32_t priority) const {
  std::vector<DemoEndpoint> endpoints;
  for (const DemoEndpoint& endpoint : config_.endpoints) {
    if (endpoint.priority == priority) endpoints.push_back(endpoint);
  }
  return endpoints;
}

std::string DemoClient::ServerOf(const std::string& peer) const {
  for (const DemoEndpoint& endpoint : config_.endpoints) {
    if (endpoint.address == peer) return endpoint.name;
  }
  return peer;  // not one of ours: shown as it is, and counted for no priority
}

Task<CallTally> DemoClient::Send(const std::vector<std::string>& header_values,
                                 const std::string& label) {
  CallTally tally;
  for (const std::string& value : header_values) {
    CallOptions options;
    options.metadata = {{config_.hash_header, value}};
    options.timeout = kCallTimeout;
    options.wait_for_ready = true;
    // An empty SimpleRequest: the answer's peer says which server it was.
    StatusOr<UnaryResponse> reply = co_await channel_.UnaryCall(kUnaryCall, "", options);
    ++tally.calls;
    if (reply.ok()) {
      const std::string server = ServerOf(reply->peer);
      ++tally.per_server[server];
      tally.servers_of_value[value].insert(server);
    } else {
      if (tally.failed++ == 0) tally.first_error = reply.status().ToString();
    }
    progress_.Show(label + ": " + std::to_string(tally.calls) + "/" +
                   std::to_string(header_values.size()) + " calls, " +
                   std::to_string(tally.failed) + " failed");
  }
  progress_.Clear();
  co_return tally;
}

std::vector<std::string> HeaderValues(int first, int count) {
  std::vector<std::string> values;
  for (int i = first; i < first + count; ++i) values.push_back("user-" + std::to_string(i));
  return values;
}

CsdsClientStatus CsdsStatusOf(const XdsClient& client, const std::string& scope) {
  CsdsClientStatus status;
  status.client_scope = scope;
  status.node_id = client.bootstrap().node.id;
  for (const XdsResourceSnapshot& entry : client.Snapshot()) {
    CsdsResourceStatus resource;
    resource.type_url = entry.type_url;
    resource.name = entry.name;
    resource.state = entry.state;
    if (entry.has_resource) resource.version = entry.version;
    if (!entry.error.ok()) resource.error = entry.error.message();
    resource.failed_version = entry.failed_version;
    status.resources.push_back(std::move(resource));
  }
  return status;
}

bool AllAcked(const CsdsClientStatus& client, const std::vector<std::string>& type_names,
              std::string& missing) {
  missing.clear();
  for (const std::string& type : type_names) {
    const bool found = std::any_of(
        client.resources.begin(), client.resources.end(), [&](const CsdsResourceStatus& r) {
          return ShortTypeName(r.type_url) == type && r.state == XdsCacheState::kAcked;
        });
    if (!found) missing += (missing.empty() ? "" : ", ") + type + " not ACKED";
  }
  for (const CsdsResourceStatus& r : client.resources) {
    if (r.state != XdsCacheState::kAcked) {
      missing +=
          (missing.empty() ? "" : ", ") + r.name + " " + std::string(XdsCacheStateName(r.state));
    }
  }
  return missing.empty();
}

}  // namespace uxds::tool
