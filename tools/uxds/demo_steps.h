// The client side of `uxds demo`: calls through the public Channel, tallied
// by the server that answered, and the progress line shown while they run.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "demo_config.h"
#include "uxds/client_channel.h"
#include "uxds/csds_client.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"

namespace uxds::tool {

// One line on stderr, rewritten in place while a step runs; only on a
// terminal (a pipe or a file gets the step results alone).
class ProgressLine {
 public:
  ProgressLine();
  void Show(const std::string& text);
  void Clear();

 private:
  const bool enabled_;
  bool shown_ = false;
};

// Who answered a batch of calls.
struct CallTally {
  int calls = 0;
  int failed = 0;
  std::string first_error;
  std::map<std::string, int> per_server;  // endpoint name -> calls it answered
  // header value -> the servers that answered it
  std::map<std::string, std::set<std::string>> servers_of_value;

  int AnsweredBy(const std::vector<DemoEndpoint>& servers) const;
  // "p0-1 52, p0-2 47, ..." over `servers`, zeros included.
  std::string Spread(const std::vector<DemoEndpoint>& servers) const;
};

class DemoClient {
 public:
  DemoClient(Channel& channel, const DemoConfig& config, ProgressLine& progress);

  // One TestService UnaryCall per header value, in order, each waiting for
  // a usable endpoint (wait_for_ready) for at most 10 s.
  Task<CallTally> Send(const std::vector<std::string>& header_values, const std::string& label);

  // The endpoints of one priority.
  std::vector<DemoEndpoint> Priority(uint32_t priority) const;

 private:
  std::string ServerOf(const std::string& peer) const;

  Channel& channel_;
  const DemoConfig& config_;
  ProgressLine& progress_;
};

// "user-<first>" .. "user-<first + count - 1>".
std::vector<std::string> HeaderValues(int first, int count);

// An in-process XdsClient's cache as CSDS reports it (A40), for the table.
CsdsClientStatus CsdsStatusOf(const XdsClient& client, const std::string& scope);

// Whether every entry of `client` is ACKED, and it has one of each of
// `type_names` (ShortTypeName); `missing` names what is not.
bool AllAcked(const CsdsClientStatus& client, const std::vector<std::string>& type_names,
              std::string& missing);

}  // namespace uxds::tool
