// XdsClientPool: one XdsClient per target, shared while someone holds it,
// shut down when the last holder lets go, each reporting its key as CSDS
// client_scope; against the fake control plane.
#include "uxds/xds_client_pool.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "xds/client/xds_client_pool_state.h"
#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

class XdsClientPoolTest : public XdsClientTest {
 protected:
  void SetUp() override {
    XdsClientTest::SetUp();
    loop_->RunSync([&] {
      auto pool = XdsClientPool::Create(loop_->loop(), MakeBootstrap(cp_->target()), TestOptions());
      ASSERT_TRUE(pool.ok()) << pool.status().ToString();
      pool_ = *std::move(pool);
    });
  }
  void TearDown() override {
    loop_->RunSync([&] { pool_.reset(); });
    XdsClientTest::TearDown();
  }

  std::shared_ptr<XdsClient> Get(const std::string& target) {
    std::shared_ptr<XdsClient> client;
    loop_->RunSync([&] {
      auto got = pool_->Get(target);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      client = *std::move(got);
    });
    return client;
  }
  void Release(std::shared_ptr<XdsClient>& client) {
    loop_->RunSync([&] { client.reset(); });
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    loop_->RunSync([&] { keys = pool_->Keys(); });
    return keys;
  }
  // The client_scope of every ClientConfig the pool's CSDS registry reports.
  std::vector<std::string> CsdsScopes() {
    const envoy::service::status::v3::ClientStatusResponse response = FetchCsds(*loop_, *pool_);
    std::vector<std::string> scopes;
    for (const auto& config : response.config()) {
      scopes.push_back(config.client_scope());
    }
    return scopes;
  }
  template <typename T>
  std::shared_ptr<RecordingWatcher<T>> WatchWith(XdsClient& client,
                                                 const XdsResourceTypeImpl<T>& type,
                                                 const std::string& name) {
    auto watcher = std::make_shared<RecordingWatcher<T>>();
    loop_->RunSync([&] { client.WatchResource(type, name, watcher); });
    return watcher;
  }

  std::shared_ptr<XdsClientPool> pool_;
};

TEST_F(XdsClientPoolTest, ATargetHasOneClientSharedByItsUsers) {
  auto first = Get("xds:///a");
  auto second = Get("xds:///a");
  auto other = Get("xds:///b");
  auto server = Get(std::string(XdsClientPool::kServerKey));
  EXPECT_EQ(first.get(), second.get());
  EXPECT_NE(first.get(), other.get());
  EXPECT_NE(first.get(), server.get());
  EXPECT_EQ(Keys(), (std::vector<std::string>{"xds:///a", "xds:///b", "#server"}));
  // A40 / A71: each client's CSDS scope is its key, and the pool reports
  // them all.
  EXPECT_EQ(CsdsScopes(), (std::vector<std::string>{"xds:///a", "xds:///b", "#server"}));
  Release(first);
  Release(second);
  Release(other);
  Release(server);
}

TEST_F(XdsClientPoolTest, TheLastUserReleasesTheClientAndItsStream) {
  auto first = Get("xds:///a");
  auto second = Get("xds:///a");
  auto watcher = WatchWith(*first, TestClusterType::Get(), "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)});
  EXPECT_TRUE(NextIsCluster(*watcher, "c1", 1000));
  // One user left: the client and its stream stay.
  Release(first);
  EXPECT_EQ(Keys(), std::vector<std::string>{"xds:///a"});
  // The last one: the client goes without a Shutdown() by its users, its
  // stream closes, and it leaves the pool and CSDS.
  Release(second);
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  EXPECT_TRUE(Keys().empty());
  EXPECT_TRUE(CsdsScopes().empty());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
  // The next user gets a new client, which subscribes afresh.
  auto again = Get("xds:///a");
  auto new_watcher = WatchWith(*again, TestClusterType::Get(), "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  Release(again);
}

TEST_F(XdsClientPoolTest, ClientsOutliveThePool) {
  auto client = Get("xds:///a");
  loop_->RunSync([&] { pool_.reset(); });
  auto watcher = WatchWith(*client, TestClusterType::Get(), "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  Release(client);
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
}

TEST(XdsClientPoolCreateTest, AnInvalidBootstrapIsRefused) {
  auto loop = Loop::Create();
  ASSERT_TRUE(loop.ok());
  auto pool = XdsClientPool::Create(**loop, Bootstrap{});
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("xds_servers"), std::string::npos)
      << pool.status().ToString();
}

}  // namespace
}  // namespace uxds::testing
