#include "xds/csds/csds_client_registry.h"

#include <optional>
#include <utility>

#include "xds/client/xds_client_impl.h"

namespace uxds::csds {

using envoy::service::status::v3::ClientConfig;
using envoy::service::status::v3::ClientStatusResponse;

struct CsdsClientRegistry::Entry {
  explicit Entry(XdsClient& c) : client(&c) {}
  // Held while the client is dumped and while it leaves, so a client is
  // never dumped after its registration was reset.
  std::mutex mu;
  XdsClient* client;  // nullptr once the registration was reset
};

// One Fetch() in flight: the dumps arrive from the clients' loops (any
// thread), the last one wakes the fetching task on its own loop.
struct CsdsClientRegistry::FetchState {
  FetchState(Loop& loop, size_t clients) : reply_loop(loop), configs(clients), remaining(clients) {}

  // Stores the dump of client `index` (nullopt: the client left); the last
  // one posts the wake-up to the fetching loop.
  static void Deliver(const std::shared_ptr<FetchState>& state, size_t index,
                      std::optional<ClientConfig> config) {
    std::lock_guard lock(state->mu);
    state->configs[index] = std::move(config);
    if (--state->remaining > 0 || state->done == nullptr) return;
    // The event belongs to the fetching loop: set it there, unless the fetch
    // was given up (cancelled) before this runs.
    state->reply_loop.Post([state] {
      std::lock_guard lock(state->mu);
      if (state->done != nullptr) state->done->Set();
    });
  }

  std::mutex mu;
  Loop& reply_loop;
  // On reply_loop, in the fetching task's frame; nullptr once that task no
  // longer waits (which also means reply_loop may be gone).
  Event* done = nullptr;
  std::vector<std::optional<ClientConfig>> configs;
  size_t remaining;
};

// The dump of one client, posted to its loop. If the loop drops it unrun (the
// loop is being destroyed), the destructor still reports the client as gone,
// so the fetch never waits for a dump that cannot come.
class CsdsClientRegistry::PendingDump {
 public:
  PendingDump(std::shared_ptr<Entry> entry, std::shared_ptr<FetchState> state, size_t index)
      : entry_(std::move(entry)), state_(std::move(state)), index_(index) {}
  ~PendingDump() {
    if (!delivered_) FetchState::Deliver(state_, index_, std::nullopt);
  }
  PendingDump(const PendingDump&) = delete;
  PendingDump& operator=(const PendingDump&) = delete;

  // On the client's loop thread.
  void Run() {
    std::optional<ClientConfig> config;
    {
      std::lock_guard lock(entry_->mu);
      if (entry_->client != nullptr)
        config = xds_internal::ImplOf(*entry_->client).DumpClientConfig();
    }
    delivered_ = true;
    FetchState::Deliver(state_, index_, std::move(config));
  }

 private:
  std::shared_ptr<Entry> entry_;
  std::shared_ptr<FetchState> state_;
  size_t index_;
  bool delivered_ = false;
};

CsdsClientRegistry::Registration& CsdsClientRegistry::Registration::operator=(
    Registration&& other) noexcept {
  if (this != &other) {
    Reset();
    entry_ = std::move(other.entry_);
  }
  return *this;
}

void CsdsClientRegistry::Registration::Reset() {
  if (entry_ == nullptr) return;
  {
    std::lock_guard lock(entry_->mu);
    entry_->client = nullptr;
  }
  entry_.reset();
}

CsdsClientRegistry::Registration CsdsClientRegistry::Add(XdsClient& client) {
  auto entry = std::make_shared<Entry>(client);
  std::lock_guard lock(mu_);
  entries_.push_back(entry);
  return Registration(std::move(entry));
}

size_t CsdsClientRegistry::size() const {
  std::lock_guard lock(mu_);
  size_t live = 0;
  for (const auto& entry : entries_) {
    std::lock_guard entry_lock(entry->mu);
    live += entry->client != nullptr;
  }
  return live;
}

std::vector<std::shared_ptr<CsdsClientRegistry::Entry>> CsdsClientRegistry::LiveEntries() {
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [](const std::shared_ptr<Entry>& entry) {
    std::lock_guard entry_lock(entry->mu);
    return entry->client == nullptr;
  });
  return entries_;
}

bool CsdsClientRegistry::PostDump(const std::shared_ptr<Entry>& entry,
                                  const std::shared_ptr<FetchState>& state, size_t index) {
  // Posting under the entry's lock: a client still registered has a live
  // loop (its owner resets the registration before destroying either).
  std::lock_guard lock(entry->mu);
  if (entry->client == nullptr) return false;
  auto job = std::make_shared<PendingDump>(entry, state, index);
  entry->client->loop().Post([job] { job->Run(); });
  return true;
}

Task<StatusOr<ClientStatusResponse>> CsdsClientRegistry::Fetch(Loop& loop,
                                                               bool exclude_resource_contents) {
  ClientStatusResponse response;
  std::vector<std::shared_ptr<Entry>> entries = LiveEntries();
  if (entries.empty()) co_return response;

  Event done(loop);
  auto state = std::make_shared<FetchState>(loop, entries.size());
  state->done = &done;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!PostDump(entries[i], state, i)) FetchState::Deliver(state, i, std::nullopt);
  }
  Status waited = co_await done.Wait();

  std::vector<std::optional<ClientConfig>> configs;
  {
    std::lock_guard lock(state->mu);
    state->done = nullptr;
    if (waited.ok()) configs = std::move(state->configs);
  }
  if (!waited.ok()) co_return waited;
  for (std::optional<ClientConfig>& config : configs) {
    if (!config.has_value()) continue;
    if (exclude_resource_contents) {
      for (auto& generic : *config->mutable_generic_xds_configs()) generic.clear_xds_config();
    }
    *response.add_config() = std::move(*config);
  }
  co_return response;
}

}  // namespace uxds::csds
