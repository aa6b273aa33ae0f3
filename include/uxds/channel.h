// Picking an endpoint: the data path of uxds (gRFC A42, A27, A56).
//
// The LB policies run on the control thread and publish immutable pickers
// into a PickerSlot. Application threads pick from the slot inside a
// PickScope: no lock, no allocation, no system call, and no atomic
// read-modify-write on a line other threads write, for a pick that returns
// a READY endpoint. Publication is one atomic pointer swap; an old picker
// (and every subchannel it names) is freed on the control thread only after
// every scope that might still see it has ended (epoch-based reclamation).
//
//   uxds::PickScope scope(slot);             // a read-side section
//   uxds::PickResult r = scope.Pick(args);   // any thread, any number of them
//   if (r.kind == uxds::PickResult::Kind::kComplete) use(r.endpoint);  // inside the scope
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "uxds/status.h"

namespace uxds {

// gRPC's connectivity states; what a subchannel, a policy and a channel report.
enum class ConnectivityState : uint8_t {
  kIdle = 0,
  kConnecting = 1,
  kReady = 2,
  kTransientFailure = 3,
};
// "IDLE", "CONNECTING", "READY", "TRANSIENT_FAILURE".
std::string_view ConnectivityStateName(ConnectivityState state);

class Subchannel;         // one connection to one address (src/lb/subchannel.h)
class CallCounter;        // in-flight calls of a cluster (circuit breaking, A32)
class LocalityLoadStats;  // calls of one locality, for load reports (LRS)

// A picked endpoint: its address and the subchannel to start the call on
// (on the control thread; the channel does that).
struct Endpoint {
  std::string address;  // "10.0.0.1:443", "[2001:db8::1]:443"
  Subchannel* subchannel = nullptr;
  // Small and unique among the live endpoints of one channel (reused once
  // an endpoint is gone): a picker keeps what it knows per endpoint in an
  // array at this index, so a pick looks it up without hashing the address.
  uint32_t index = 0;
};

// A request header as route selection sees it (lower-case name).
struct PickHeader {
  std::string_view name;
  std::string_view value;
};

// A set of endpoints by Endpoint::index, one bit each (the caller's
// words; a pick reads them and copies nothing).
struct EndpointMask {
  std::span<const uint64_t> words;
  bool Contains(uint32_t index) const {
    const size_t word = index / 64;
    return word < words.size() && ((words[word] >> (index % 64)) & 1) != 0;
  }
};

struct PickArgs {
  // A42: the request hash the channel computed from the route's hash
  // policies (a random one when none produced a hash). Unset: ring_hash
  // fails the pick unless its request_hash_header is configured (A76).
  std::optional<uint64_t> hash;
  // The request's metadata (CallOptions::metadata, lower-case names, in
  // the caller's own strings: a pick copies nothing); ring_hash's
  // request_hash_header reads it (A76).
  std::span<const std::pair<std::string, std::string>> metadata;
  // Endpoints the picking thread cannot use whatever their subchannel's
  // state (a LoopChannel's endpoints its own loop failed to connect to):
  // ring_hash takes them as TRANSIENT_FAILURE and walks past them (A42),
  // failing the pick as A42 does when nothing else is left; round_robin
  // passes over them, and weighted_target over a locality that has nothing
  // else; with nothing else left, those two return one of them, and the
  // caller fails or queues the call as for a TRANSIENT_FAILURE pick. Null:
  // none (the common case costs one test).
  const EndpointMask* unreachable = nullptr;
};

struct PickResult {
  enum class Kind : uint8_t { kComplete, kQueue, kFail };
  Kind kind = Kind::kQueue;
  // kFail because the call was dropped (A27 drop_overloads, A32 circuit
  // breaker): the call fails at once, wait_for_ready or not. (Beside
  // `kind`, so that the struct stays six words.)
  bool drop = false;
  // kComplete: valid until the PickScope that returned it ends.
  const Endpoint* endpoint = nullptr;
  // kComplete through cluster_impl: the call counts against the cluster's
  // max_requests until the caller calls CallEnded(counter) (A32).
  CallCounter* call_counter = nullptr;
  // kComplete through cluster_impl of a cluster that reports load (A42
  // LRS): the call counts as in progress in its locality until the caller
  // reports its end with CallFinished().
  LocalityLoadStats* locality_stats = nullptr;
  // kFail: why (owned by the picker, valid while the scope lives).
  const Status* status = nullptr;
  // kComplete through least_request (A48): the call counts as outstanding
  // on its endpoint until its end is given (CallFinished/CallNotStarted).
  CallCounter* endpoint_calls = nullptr;

  static PickResult Complete(const Endpoint* e) {
    return {Kind::kComplete, false, e, nullptr, nullptr, nullptr, nullptr};
  }
  static PickResult Queue() { return {}; }
  static PickResult Fail(const Status* s) {
    return {Kind::kFail, false, nullptr, nullptr, nullptr, s, nullptr};
  }
  static PickResult Drop(const Status* s) {
    return {Kind::kFail, true, nullptr, nullptr, nullptr, s, nullptr};
  }
};

// Every kComplete pick is ended exactly once, by one of the three below:
// the pick's A32 counter lives while calls are counted in it, so an end
// never given keeps it (and its count) forever, and one given twice may
// free it under another call.
//
// Releases one call counted by a pick (any thread).
void CallEnded(CallCounter* counter);
// The hook a channel calls, once, when a call picked kComplete ends (any
// thread; `picked` may be a copy kept after the PickScope ended: only
// call_counter, endpoint_calls and locality_stats are used; the counters
// outlive the scope by themselves, the locality while the caller holds
// it): releases its max_requests slot (A32) and its endpoint's
// outstanding count (A48), and counts the call in its locality's load
// report as succeeded (`ok`: status OK) or failed.
void CallFinished(const PickResult& picked, bool ok);
// Instead of CallFinished(), for a call picked kComplete that never
// started (its endpoint's connection went away; the channel picks again;
// or a policy put the pick aside for another): releases its slot and its
// endpoint's count, and takes it out of its locality's issued calls.
void CallNotStarted(const PickResult& picked);

// An immutable picker snapshot. Pick() runs on any thread, concurrently.
class Picker {
 public:
  virtual ~Picker() = default;
  virtual PickResult Pick(const PickArgs& args) const = 0;
};

// Where the control thread publishes pickers and application threads pick.
// Publish() and the reclamation of old pickers are control-thread only.
class PickerSlot {
 public:
  PickerSlot();
  // Frees the current picker; no scope may be open on this slot.
  ~PickerSlot();
  PickerSlot(const PickerSlot&) = delete;
  PickerSlot& operator=(const PickerSlot&) = delete;

  // Control thread: makes `picker` current (one atomic swap; nullptr: picks
  // queue) and retires the
  // previous one; it is deleted by a later Reclaim() once no scope that
  // began before the swap is still open.
  void Publish(const Picker* picker);
  // Control thread: deletes retired pickers no reader can see any more.
  // Returns how many are still waiting. What an earlier Reclaim() of any
  // slot proved unreachable goes without a system call; otherwise it looks
  // at every reader, which costs a membarrier (a barrier on every CPU that
  // runs a thread of the process): callers batch their calls (a timer, or
  // every so many retirements), not one per Publish().
  size_t Reclaim();
  // Retired pickers not deleted yet.
  size_t retired() const { return retired_count_; }
  // How many Reclaim() calls of the process (every slot) had to look at the
  // readers (each a membarrier where available).
  static uint64_t reader_scans();

 private:
  friend class PickScope;
  struct Retired;
  // Deletes the retired pickers with an epoch below `bound`; how many are
  // left.
  size_t FreeBelow(uint64_t bound);
  // Read by every pick; a line of its own, apart from what only the
  // control thread writes.
  alignas(64) std::atomic<const Picker*> current_{nullptr};
  alignas(64) Retired* retired_ = nullptr;  // control thread only
  size_t retired_count_ = 0;                // control thread only
};

// A read-side section on the calling thread. Scopes nest; a thread may have
// scopes on several slots open at once.
class PickScope {
 public:
  explicit PickScope(const PickerSlot& slot);
  ~PickScope();
  PickScope(const PickScope&) = delete;
  PickScope& operator=(const PickScope&) = delete;

  // Queue when nothing was published yet.
  PickResult Pick(const PickArgs& args) const {
    return picker_ == nullptr ? PickResult::Queue() : picker_->Pick(args);
  }
  // What this scope sees (null: nothing published); valid until it ends.
  const Picker* picker() const { return picker_; }

 private:
  const Picker* picker_;
};

}  // namespace uxds
