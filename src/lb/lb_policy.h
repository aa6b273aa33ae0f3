// The LB policy tree of one cluster (A27, A42, A56): policies are objects on
// the control thread; each reports its aggregated state and an immutable
// picker to its parent, and the top one publishes into a PickerSlot.
//
//   cluster_impl            drops (A27), max_requests circuit breaker (A32)
//    └ priority             failover between priorities (A56, A42)
//       └ per priority:  ring_hash (A42, A76)                       RING_HASH
//                      | weighted_target (A27) └ round_robin / locality    ROUND_ROBIN
//                      | round_robin over every locality's endpoints   bare round_robin
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lb/subchannel.h"
#include "runtime/socket_address.h"
#include "uxds/channel.h"
#include "uxds/ring_hash.h"

namespace uxds {

struct WeightedEndpoint {
  SocketAddress address;
  std::string hash_key;  // A76 (empty: the address is hashed)
  uint32_t weight = 1;   // the endpoint's load_balancing_weight
  // A29: how connections to it are secured, from its cluster (null:
  // plaintext). The same address secured two ways is two subchannels.
  std::shared_ptr<const UpstreamTls> tls = nullptr;
};

struct WeightedLocality {
  std::string name;     // LocalityName::ToString()
  uint32_t weight = 1;  // the locality's load_balancing_weight
  std::vector<WeightedEndpoint> endpoints;
};

// One priority's localities, in the EDS order.
using LocalityList = std::vector<WeightedLocality>;

class LbPolicy {
 public:
  // How a policy tells its parent about a change, on the control thread.
  // The picker is never null.
  using Reporter = std::function<void(ConnectivityState state, const Status& status,
                                      std::shared_ptr<const Picker> picker)>;

  virtual ~LbPolicy() = default;
  // New endpoints. The policy reports (at least once) before returning.
  virtual void Update(const LocalityList& localities) = 0;
  // The parent wants this policy to leave IDLE (start connecting).
  virtual void ExitIdle() {}
};

// Pickers shared by several policies.
class QueuePicker final : public Picker {
 public:
  PickResult Pick(const PickArgs&) const override { return PickResult::Queue(); }
};

class FailPicker final : public Picker {
 public:
  explicit FailPicker(Status status) : status_(std::move(status)) {}
  PickResult Pick(const PickArgs&) const override { return PickResult::Fail(&status_); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// A fast per-thread generator for picks (no lock, no system call, no
// shared state): splitmix64 seeded from the clock and the thread's address.
uint64_t ThreadRandom();

// Options of every policy of one cluster's tree.
struct LbPolicyOptions {
  LbPolicyOptions() {}
  // A42: ring sizes from the Cluster, capped locally (gRPC's default 4096).
  RingSizeConfig ring_sizes;
  // A76: when set, ring_hash hashes this request header instead of the
  // hash the channel computed from the route's hash policies.
  std::string request_hash_header;
  // A56 / A42 timers; tests shorten them.
  std::chrono::milliseconds priority_failover_timeout{10000};
  std::chrono::milliseconds child_retention_interval{15 * 60 * 1000};
  // A37: how pick_first (a LOGICAL_DNS cluster's priority) asks the
  // resolver to resolve again; may be null.
  std::function<void()> request_reresolution;
};

}  // namespace uxds
