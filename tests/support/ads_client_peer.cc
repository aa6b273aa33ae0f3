#include "support/ads_client_peer.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace uxds::testing {

std::unique_ptr<AdsClientPeer> AdsClientPeer::Start(const std::string& target,
                                                    const std::vector<std::string>& extra_args,
                                                    std::chrono::milliseconds wait) {
  std::vector<std::string> argv = {Python(), SourceRoot() + "/tests/peers/ads_client.py",
                                   "--target", target};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  std::optional<CommandedSubprocess> peer = CommandedSubprocess::Start(argv);
  if (!peer) return nullptr;
  if (!peer->process().WaitForLine("READY", wait)) {
    ADD_FAILURE() << "ads_client.py did not start";
    return nullptr;
  }
  return std::unique_ptr<AdsClientPeer>(new AdsClientPeer(std::move(*peer), wait));
}

AdsClientPeer::json AdsClientPeer::Command(json command) {
  EXPECT_TRUE(peer_.WriteLine(command.dump())) << "ads_client.py is gone";
  while (std::optional<json> line = ReadLine()) {
    if (line->contains("event")) {
      events_.push_back(std::move(*line));
      continue;
    }
    EXPECT_TRUE(line->value("ok", false)) << command.dump() << " -> " << line->dump();
    return *line;
  }
  ADD_FAILURE() << "ads_client.py did not answer " << command.dump();
  return json::object();
}

void AdsClientPeer::Open(bool wait_for_ready) {
  Command({{"cmd", "open"}, {"wait_for_ready", wait_for_ready}});
}

void AdsClientPeer::Request(json request) {
  request["cmd"] = "request";
  Command(std::move(request));
}

AdsClientPeer::json AdsClientPeer::NextEvent() {
  if (!events_.empty()) {
    json event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  std::optional<json> line = ReadLine();
  if (!line) return json();
  EXPECT_TRUE(line->contains("event")) << "reply without a command: " << line->dump();
  return *line;
}

std::optional<AdsClientPeer::json> AdsClientPeer::ReadLine() {
  std::optional<std::string> line = peer_.process().ReadLine(wait_);
  if (!line) return std::nullopt;
  json parsed = json::parse(*line, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << *line;
  return parsed;
}

}  // namespace uxds::testing
