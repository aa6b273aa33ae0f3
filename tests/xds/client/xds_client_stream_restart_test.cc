// A new ADS stream starts from a clean slate (A57; NOTES "ACK / NACK"): its
// first request carries the node, and no request on it echoes a nonce of the
// stream before, even when the old stream died with requests queued or half
// written and with responses being applied. The control plane's request
// checker (tests/peers/ads_request_checker.py) judges every request; the
// connections are cut again and again while the client is busy.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

class XdsClientStreamRestartTest : public XdsClientTest {
 protected:
  // On the loop thread: watches `name` if `watcher` is null, else cancels
  // that watch.
  template <typename T>
  void ToggleWatch(const XdsResourceTypeImpl<T>& type, const std::string& name,
                   std::shared_ptr<RecordingWatcher<T>>& watcher) {
    if (watcher == nullptr) {
      watcher = std::make_shared<RecordingWatcher<T>>();
      client_->WatchResource(type, name, watcher);
    } else {
      client_->CancelWatch(type, name, watcher.get());
      watcher = nullptr;
    }
  }
};

std::string Name(int i) { return "c" + std::to_string(i); }

// Enough names that a request and a response take more than one write and
// one read, so a cut lands in the middle of them.
constexpr int kNames = 400;
constexpr int kRounds = 25;

TEST_F(XdsClientStreamRestartTest, EveryStreamStartsWithTheNodeAndNoStaleNonce) {
  std::map<std::string, ResponseResource> clusters;
  std::map<std::string, ResponseResource> endpoints;
  for (int i = 0; i < kNames; ++i) {
    clusters.emplace(Name(i), ResponseResource(ClusterAny(Name(i))));
    endpoints.emplace(Name(i), ResponseResource(EndpointsAny(Name(i))));
  }
  ASSERT_TRUE(cp_->SetResources(kClusterTypeUrl, clusters, "1"));
  ASSERT_TRUE(cp_->SetResources(kEndpointsTypeUrl, endpoints, "1"));
  StartClient();
  std::vector<std::shared_ptr<ClusterWatcher>> cluster_watchers(kNames);
  std::vector<std::shared_ptr<EndpointsWatcher>> endpoints_watchers(kNames);
  loop_->RunSync([&] {
    for (int i = 0; i < kNames / 2; ++i) {
      cluster_watchers[i] = std::make_shared<ClusterWatcher>();
      client_->WatchResource(TestClusterType::Get(), Name(i), cluster_watchers[i]);
    }
  });
  ASSERT_TRUE(cp_->WaitForStreamOpened(kWait).has_value());
  for (int round = 0; round < kRounds; ++round) {
    // Requests of both types queued on the loop (a subscription change per
    // name), then the connection cut while they are written and answered.
    loop_->RunSync([&] {
      for (int i = 0; i < kNames; ++i) {
        if ((i + round) % 3 == 0) ToggleWatch(TestClusterType::Get(), Name(i), cluster_watchers[i]);
        if ((i + round) % 5 == 0) {
          ToggleWatch(TestEndpointsType::Get(), Name(i), endpoints_watchers[i]);
        }
      }
    });
    // Every other round the cut waits for the next stream's first request,
    // so it also lands while responses to it are applied.
    if (round % 2 == 1) {
      ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
    }
    ASSERT_TRUE(cp_->DropAllConnections());
  }
  // The client comes back: every watched Cluster arrives on a new stream.
  for (int i = 0; i < kNames; ++i) {
    if (cluster_watchers[i] == nullptr) continue;
    bool received = false;
    while (!received) {
      std::optional<ClusterWatcher::Event> event = cluster_watchers[i]->Next();
      ASSERT_TRUE(event.has_value()) << Name(i) << " never arrived";
      received = event->kind == ClusterWatcher::Event::Kind::kResource;
    }
  }
  EXPECT_EQ(cp_->TakeViolations(), std::vector<std::string>{});
}

}  // namespace
}  // namespace uxds::testing
