// RequestMemoryBudget: one bound on the request bytes a whole server holds
// for its connections, however many there are.
//
// What it counts (`used`): the bytes every connection's streams hold
// (complete messages not yet read and messages still arriving), plus the
// connection-level flow-control credit a connection was given beyond
// HTTP/2's initial 65 535 bytes.
//
// How it bounds them: a connection returns the connection credit its peer
// used only while the budget has room, so past the budget every peer stops
// once it has spent the credit it holds. No credit is granted ahead: a
// connection starts at HTTP/2's initial window, free of charge, and its
// window grows (doubling, to 16 MiB) only as its peer fills it and only
// while the budget is less than half used; all growth together is capped
// at a quarter of the budget, so idle connections cannot promise the budget
// away. What a server holds is thus at most the budget plus 64 KiB per
// connection.
//
// Progress: a budget full of messages that never finish would stall every
// connection for good (no handler can read a message that is not whole,
// and no peer gets the credit to finish one). So when a connection has to
// wait while unfinished messages hold at least half the budget, the
// largest unfinished message of the connection holding the most of them is
// abandoned: its call ends with RESOURCE_EXHAUSTED and its bytes are freed.
// gRPC C++'s memory quota reclaims the same way, by ending work under
// pressure.
//
// Loop-confined: a server's connections all run on its loop.
#pragma once

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
    // Bytes of messages still arriving that the member holds.
    virtual size_t unfinished_bytes() const = 0;
    // Ends the call of the largest message still arriving with `reason`
    // and frees its bytes.
    virtual void AbandonLargestUnfinished(const Status& reason) = 0;

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
  // Messages abandoned so far to make room.
  uint64_t abandoned_messages() const { return abandoned_; }

  void Join(Member* member);
  void Leave(Member* member);
  size_t members() const { return members_.size(); }

  // A member's held bytes go from `before` to `after`, of which messages
  // still arriving from `unfinished_before` to `unfinished_after`. When they
  // shrink, waiters are told.
  void Recharge(size_t before, size_t after, size_t unfinished_before, size_t unfinished_after);
  // Whether a connection window may grow by `more` bytes; if so, charges it
  // (given back with ReleaseGrowth when the connection ends).
  bool TryGrowWindow(size_t more);
  void ReleaseGrowth(size_t bytes);

  // `member` is told once when there is room; a second call while it waits
  // changes nothing. If unfinished messages hold half the budget, abandons
  // them, largest first, until there is room.
  void WaitForRoom(Member* member);
  void ForgetWaiter(Member* member);

 private:
  void TellWaiters();
  void AbandonUnfinishedWhileStuck();

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
