// XdsClientPool (include/uxds/xds_client_pool.h).
#include "uxds/xds_client_pool.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "xds/client/xds_client_pool_state.h"
#include "xds/csds/csds_service.h"

namespace uxds {

namespace xds_internal {
XdsClientPoolState& StateOf(XdsClientPool& pool) { return *pool.state_; }
}  // namespace xds_internal

namespace {

// A pooled client with its CSDS registration, which must end before the
// client does.
struct PooledClient {
  csds::CsdsClientRegistry::Registration registration;
  std::unique_ptr<XdsClient> client;
};

}  // namespace

StatusOr<std::shared_ptr<XdsClientPool>> XdsClientPool::Create(Loop& loop, Bootstrap bootstrap,
                                                               XdsClientOptions options) {
  // The checks XdsClient::Create makes, once, with a client that is never
  // started (it connects nothing until a watch).
  StatusOr<std::unique_ptr<XdsClient>> probe = XdsClient::Create(loop, bootstrap, options);
  if (!probe.ok()) return probe.status();
  probe->reset();
  return std::shared_ptr<XdsClientPool>(
      new XdsClientPool(std::make_shared<xds_internal::XdsClientPoolState>(
          loop, std::move(bootstrap), std::move(options))));
}

XdsClientPool::XdsClientPool(std::shared_ptr<xds_internal::XdsClientPoolState> state)
    : state_(std::move(state)) {}

XdsClientPool::~XdsClientPool() = default;

StatusOr<std::shared_ptr<XdsClient>> XdsClientPool::Get(std::string_view target) {
  assert(state_->loop.InLoopThread());
  auto it = state_->clients.find(target);
  if (it != state_->clients.end()) {
    if (std::shared_ptr<XdsClient> client = it->second.client.lock()) return client;
  }
  XdsClientOptions options = state_->options;
  // A40 / A71: the client_scope of a client's CSDS ClientConfig is its key.
  options.client_scope = std::string(target);
  StatusOr<std::unique_ptr<XdsClient>> made =
      XdsClient::Create(state_->loop, state_->bootstrap, std::move(options));
  if (!made.ok()) return made.status();
  auto pooled = std::make_unique<PooledClient>();
  pooled->registration = state_->csds->Add(**made);
  pooled->client = *std::move(made);
  XdsClient* client = pooled->client.get();
  // The last reference leaves the map and the registry first, then destroys
  // the client (which shuts itself down on the loop, ~XdsClient).
  std::shared_ptr<PooledClient> holder(
      pooled.release(), [state = state_, key = std::string(target)](PooledClient* p) {
        auto entry = state->clients.find(key);
        if (entry != state->clients.end() && entry->second.client.expired()) {
          state->clients.erase(entry);
        }
        p->registration.Reset();
        delete p;
      });
  std::shared_ptr<XdsClient> shared(holder, client);
  state_->clients.insert_or_assign(
      std::string(target), xds_internal::XdsClientPoolState::Live{shared, state_->created++});
  return shared;
}

std::vector<std::string> XdsClientPool::Keys() const {
  std::vector<std::pair<uint64_t, std::string>> live;
  for (const auto& [key, entry] : state_->clients) {
    if (!entry.client.expired()) live.emplace_back(entry.order, key);
  }
  std::sort(live.begin(), live.end());
  std::vector<std::string> keys;
  for (auto& [order, key] : live) keys.push_back(std::move(key));
  return keys;
}

Loop& XdsClientPool::loop() const { return state_->loop; }

const Bootstrap& XdsClientPool::bootstrap() const { return state_->bootstrap; }

void XdsClientPool::RegisterCsdsService(ServiceRegistry& registry) const {
  csds::RegisterCsdsService(registry, state_->csds);
}

}  // namespace uxds
