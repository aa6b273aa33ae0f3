#include "runtime/accept_pause.h"

#include "uxds/log.h"

namespace uxds {

bool AcceptPause::MayLog() {
  const Loop::Clock::time_point now = Loop::Clock::now();
  if (logged_before_ && now - last_log_ < kLogInterval) return false;
  logged_before_ = true;
  last_log_ = now;
  return true;
}

Task<Status> AcceptPause::AfterAcceptError(const Status& error) {
  ++accept_errors_;
  if (episode_ != Episode::kAcceptFailing) {
    episode_ = Episode::kAcceptFailing;
    episode_logged_ = MayLog();
    if (episode_logged_) {
      Log(LogSeverity::kWarning, server_ + ": " + error.message() +
                                     "; accepting paused until a connection ends (at most " +
                                     std::to_string(kAcceptPause.count()) + " ms at a time)");
    }
  }
  Timer timer(loop_);
  timer.Start(kAcceptPause, [this] { ended_.NotifyAll(); });
  const Status woken = co_await ended_.Wait();
  co_return woken;
}

void AcceptPause::Refused(size_t limit) {
  if (episode_ == Episode::kAtLimit) return;
  episode_ = Episode::kAtLimit;
  episode_logged_ = MayLog();
  if (episode_logged_) {
    Log(LogSeverity::kWarning, server_ + ": max_connections (" + std::to_string(limit) +
                                   ") reached; new connections are closed until one ends");
  }
}

void AcceptPause::Accepted() {
  if (episode_ == Episode::kNone) return;
  if (episode_logged_) Log(LogSeverity::kInfo, server_ + ": accepting connections again");
  episode_ = Episode::kNone;
  episode_logged_ = false;
}

}  // namespace uxds
