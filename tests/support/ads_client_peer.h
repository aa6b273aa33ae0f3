// tests/peers/ads_client.py driven from C++: a grpcio ADS client (an xDS
// client that is not ours), one channel, calls opened on command.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/fake_control_plane.h"

namespace uxds::testing {

class AdsClientPeer {
 public:
  using json = nlohmann::json;

  // Starts ads_client.py --target TARGET EXTRA_ARGS...; nullptr (and a test
  // failure) if it does not come up within `wait`.
  static std::unique_ptr<AdsClientPeer> Start(
      const std::string& target, const std::vector<std::string>& extra_args = {},
      std::chrono::milliseconds wait = std::chrono::seconds(30));

  // Sends a command; returns its reply (events arriving meanwhile are kept).
  json Command(json command);
  void Open(bool wait_for_ready = false);
  void Request(json request);
  // The next event line; a JSON null after `wait` without one.
  json NextEvent();

 private:
  AdsClientPeer(CommandedSubprocess peer, std::chrono::milliseconds wait)
      : peer_(std::move(peer)), wait_(wait) {}
  std::optional<json> ReadLine();

  CommandedSubprocess peer_;
  std::chrono::milliseconds wait_;
  std::deque<json> events_;
};

}  // namespace uxds::testing
