// RequestMemoryBudget: one bound on the request bytes a whole server holds
// for its connections, however many there are.
//
// What it counts (`used`): the bytes every connection's streams hold
// (complete messages not yet read and messages still arriving), plus the
// connection-level flow-control credit each connection's peer has and has
// not used yet, beyond HTTP/2's initial 65 535 bytes: memory promised.
//
// How it bounds them: a connection returns the connection credit its peer
// used (all of it) only while the budget has room or while it holds less
// than its fair share (the limit over the connections), so past the budget every peer
// that holds more than its share stops once it has spent the credit it
// has, and one that holds less (a client sending a request while others
// fill the budget) is still served. No credit is granted ahead: a
// connection starts at HTTP/2's initial window, free of charge, and its
// window grows (doubling, to 16 MiB) only as its peer fills it and only
// while the budget is less than half used; all growth together is capped
// at a quarter of the budget, so idle connections cannot promise the budget
// away (a grown window stays until its connection ends). What a server
// holds is thus at most the budget plus the connections' windows.
//
// Progress and fairness: whenever the budget is over its limit and a
// connection needs credit, the connection holding the most, if it holds
// more than its share or if unfinished messages hold half the budget, has
// its largest call ended with RESOURCE_EXHAUSTED and that call's bytes
// (complete messages and the one still arriving) freed, until the budget
// is under its limit again. Without it, messages that never finish (no
// handler can read them, no peer gets the credit to finish them), or calls
// whose handlers do not read, would hold the budget for good.
// gRPC C++'s memory quota reclaims the same way, by ending work under
// pressure.
//
// Loop-confined: a server's connections all run on its loop.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "uxds/status.h"

namespace uxds::http2::detail {

// Server default: past this, peers wait for handlers to read.
inline constexpr size_t kDefaultRequestMemoryBudget = size_t{256} << 20;

class RequestMemoryBudget {
 public:
  // A connection sharing the budget.
  class Member {
   public:
    // The budget has room again (the member asked with WaitForRoom).
    virtual void OnBudgetRoom() = 0;
    // The member's charge: what it holds and the credit it has promised.
    virtual size_t held_bytes() const = 0;
    // What ending its calls could free (its charge less unused credit).
    virtual size_t abandonable_bytes() const = 0;
    // Ends the call holding the most bytes with `reason` and frees them.
    virtual void AbandonLargestCall(const Status& reason) = 0;

   protected:
    ~Member() = default;
  };

  explicit RequestMemoryBudget(size_t limit) : limit_(limit) {}
  RequestMemoryBudget(const RequestMemoryBudget&) = delete;
  RequestMemoryBudget& operator=(const RequestMemoryBudget&) = delete;

  size_t limit() const { return limit_; }
  size_t used() const { return used_; }
  // The most `used` has been.
  size_t peak() const { return peak_; }
  size_t unfinished() const { return unfinished_; }
  size_t window_growth() const { return growth_; }
  bool has_room() const { return used_ < limit_; }
  // Calls ended so far to make room.
  uint64_t abandoned_calls() const { return abandoned_; }

  // An equal share of the limit among the members: a connection holding
  // less is never made to wait, so one whose peer sends little is served
  // whatever the others hold.
  size_t fair_share() const { return limit_ / std::max<size_t>(members_.size(), 1); }

  void Join(Member* member);
  void Leave(Member* member);
  size_t members() const { return members_.size(); }

  // A member's held bytes go from `before` to `after`, of which messages
  // still arriving from `unfinished_before` to `unfinished_after`. When they
  // shrink, waiters are told.
  void Recharge(size_t before, size_t after, size_t unfinished_before, size_t unfinished_after);
  // Whether a connection window may grow by `more` bytes; if so, counts it
  // against the cap on all growth (given back with ReleaseGrowth when the
  // connection ends).
  bool TryGrowWindow(size_t more);
  void ReleaseGrowth(size_t bytes);

  // `member` is told once when there is room; a second call while it waits
  // changes nothing.
  void WaitForRoom(Member* member);
  void ForgetWaiter(Member* member);
  // While over the limit, ends the largest call of the member holding the
  // most, as long as that is more than its fair share or unfinished
  // messages hold half the budget (see above). Does
  // nothing while waiters are being told (a member told may be inside
  // another member's nghttp2 callbacks).
  void MakeRoom();

 private:
  // Tells each waiter present once (while there is room, if asked).
  void TellWaiters(bool only_with_room);

  const size_t limit_;
  size_t used_ = 0;
  size_t peak_ = 0;
  size_t unfinished_ = 0;
  size_t growth_ = 0;
  uint64_t abandoned_ = 0;
  std::vector<Member*> members_;
  std::deque<Member*> waiters_;
  bool telling_ = false;
  bool abandoning_ = false;
};

}  // namespace uxds::http2::detail
