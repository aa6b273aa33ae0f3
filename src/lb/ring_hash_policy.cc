#include "lb/ring_hash_policy.h"

#include "lb/ring_hash_picker.h"

namespace uxds {

RingHashPolicy::RingHashPolicy(SubchannelPool& pool, const LbPolicyOptions& options,
                               Reporter reporter)
    : pool_(pool), options_(options), reporter_(std::move(reporter)) {}

RingHashPolicy::~RingHashPolicy() { DetachAll(); }

void RingHashPolicy::DetachAll() {
  for (Endpoint& e : endpoints_) e.subchannel->RemoveWatcher(e.watcher);
  endpoints_.clear();
}

void RingHashPolicy::Update(const LocalityList& localities) {
  // Weight = locality weight x endpoint weight (A42); BuildRingEndpoints
  // de-duplicates by address (NOTES.md).
  std::vector<RingHashAddress> listed;
  std::vector<const WeightedEndpoint*> listed_addresses;
  for (const WeightedLocality& locality : localities) {
    for (const WeightedEndpoint& e : locality.endpoints) {
      listed.push_back(RingHashAddress{e.address.ToString(), e.hash_key,
                                       uint64_t{locality.weight == 0 ? 1u : locality.weight} *
                                           uint64_t{e.weight == 0 ? 1u : e.weight}});
      listed_addresses.push_back(&e);
    }
  }
  std::vector<size_t> kept;
  std::vector<RingEndpoint> input = BuildRingEndpoints(listed, &kept);
  std::vector<const WeightedEndpoint*> addresses;
  addresses.reserve(kept.size());
  for (size_t i : kept) addresses.push_back(listed_addresses[i]);
  const bool same_ring = ring_ != nullptr && input.size() == ring_input_.size() &&
                         std::equal(input.begin(), input.end(), ring_input_.begin(),
                                    [](const RingEndpoint& a, const RingEndpoint& b) {
                                      return a.hash_key == b.hash_key && a.weight == b.weight;
                                    });
  if (!same_ring) {
    ring_ = std::make_shared<const Ring>(Ring::Build(input, options_.ring_sizes));
    ring_input_ = std::move(input);
  }
  // New subchannel refs first, so an address kept across the update keeps
  // its subchannel (and connection).
  std::vector<Endpoint> next;
  next.reserve(addresses.size());
  for (const WeightedEndpoint* e : addresses)
    next.push_back(Endpoint{pool_.Get(e->address, e->tls), -1});
  DetachAll();
  endpoints_ = std::move(next);
  for (Endpoint& e : endpoints_) {
    e.watcher = e.subchannel->AddWatcher(
        [this](ConnectivityState, const Status& status) { OnEndpointStateChange(status); });
  }
  Report();
}

void RingHashPolicy::ExitIdle() {
  for (Endpoint& e : endpoints_) {
    if (e.subchannel->state() == ConnectivityState::kIdle) {
      e.subchannel->RequestConnection();
      return;
    }
  }
}

void RingHashPolicy::OnEndpointStateChange(const Status& status) {
  if (!status.ok()) last_failure_ = status;
  Report();
}

ConnectivityState RingHashPolicy::Aggregate(size_t ready, size_t connecting, size_t idle,
                                            size_t transient_failure) {
  const size_t total = ready + connecting + idle + transient_failure;
  if (ready > 0) return ConnectivityState::kReady;                                 // rule 1
  if (transient_failure >= 2) return ConnectivityState::kTransientFailure;         // rule 2
  if (connecting > 0) return ConnectivityState::kConnecting;                       // rule 3
  if (transient_failure == 1 && total > 1) return ConnectivityState::kConnecting;  // rule 4
  if (idle > 0) return ConnectivityState::kIdle;                                   // rule 5
  return ConnectivityState::kTransientFailure;                                     // rule 6
}

void RingHashPolicy::Report() {
  if (endpoints_.empty()) {
    reporter_(ConnectivityState::kTransientFailure,
              UnavailableError("ring_hash: empty address list"),
              std::make_shared<FailPicker>(UnavailableError("ring_hash: empty address list")));
    return;
  }
  size_t counts[4] = {0, 0, 0, 0};
  for (const Endpoint& e : endpoints_) ++counts[static_cast<int>(e.subchannel->state())];
  const size_t idle = counts[static_cast<int>(ConnectivityState::kIdle)];
  const size_t connecting = counts[static_cast<int>(ConnectivityState::kConnecting)];
  const size_t ready = counts[static_cast<int>(ConnectivityState::kReady)];
  const size_t failed = counts[static_cast<int>(ConnectivityState::kTransientFailure)];
  const ConnectivityState state = Aggregate(ready, connecting, idle, failed);
  Status status;
  if (state == ConnectivityState::kTransientFailure) {
    status =
        UnavailableError("ring_hash: no endpoint is reachable; last error: " +
                         (last_failure_.ok() ? std::string("none") : last_failure_.ToString()));
  }
  std::vector<SubchannelRef> refs;
  refs.reserve(endpoints_.size());
  for (const Endpoint& e : endpoints_) refs.push_back(e.subchannel);
  Status failure = status.ok() ? UnavailableError("ring_hash: no endpoint is reachable") : status;
  reporter_(state, status,
            std::make_shared<RingHashPicker>(ring_, std::move(refs), options_.request_hash_header,
                                             connecting > 0, std::move(failure)));
  // A42: while CONNECTING or TRANSIENT_FAILURE, keep one attempt going even
  // without picks, so the policy can recover (proposal#475's fix: start one
  // on an IDLE endpoint when none is CONNECTING). Failed endpoints retry by
  // themselves after their backoff.
  if ((state == ConnectivityState::kConnecting || state == ConnectivityState::kTransientFailure) &&
      connecting == 0) {
    ExitIdle();
  }
}

}  // namespace uxds
