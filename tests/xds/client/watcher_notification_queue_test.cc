// WatcherNotificationQueue's pauses: a notification waits for the pauses
// (responses whose verdict is not on the wire yet) open when it was queued,
// and for no later one.
#include "xds/client/watcher_notification_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "uxds/loop.h"

namespace uxds::testing {
namespace {

using xds_internal::WatcherNotificationQueue;
using xds_internal::WatcherRegistration;

struct AmbientRecorder : XdsUntypedResourceWatcher {
  void OnResourceChanged(StatusOr<XdsResourceData>) override {}
  void OnAmbientError(Status status) override { heard.push_back(status.message()); }
  std::vector<std::string> heard;
};

// Lets the loop run what is queued (the queue delivers on later turns).
Task<void> Turns(Loop& loop) {
  for (int i = 0; i < 8; ++i) co_await loop.Yield();
}

TEST(WatcherNotificationQueueTest, ANotificationWaitsOnlyForThePausesOpenWhenItWasQueued) {
  auto loop = std::move(*Loop::Create());
  WatcherNotificationQueue queue(*loop, "node");
  auto watcher = std::make_shared<AmbientRecorder>();
  auto registration = std::make_shared<WatcherRegistration>();
  registration->watcher = watcher;
  loop->Spawn(queue.Run());
  auto heard = [&] {
    std::vector<std::string> words;
    for (const std::string& message : watcher->heard) words.push_back(message.substr(0, 2));
    return words;
  };

  const uint64_t first = queue.Pause();  // response 1 arrives
  queue.AmbientError(registration, UnavailableError("n1"));
  const uint64_t second = queue.Pause();  // response 2 arrives before 1's ACK is out
  queue.AmbientError(registration, UnavailableError("n2"));
  loop->BlockOn(Turns(*loop));
  EXPECT_TRUE(heard().empty());  // 1's verdict is not on the wire

  const uint64_t one[] = {first};
  queue.Resume(one);  // 1's ACK is out; 2's is not
  loop->BlockOn(Turns(*loop));
  EXPECT_EQ(heard(), std::vector<std::string>{"n1"});

  const uint64_t third = queue.Pause();  // a flood: always one more open
  const uint64_t two[] = {second};
  queue.Resume(two);
  loop->BlockOn(Turns(*loop));
  EXPECT_EQ(heard(), (std::vector<std::string>{"n1", "n2"}));

  const uint64_t three[] = {third};
  queue.Resume(three);
  queue.AmbientError(registration, UnavailableError("n3"));  // nothing open: at once
  loop->BlockOn(Turns(*loop));
  EXPECT_EQ(heard(), (std::vector<std::string>{"n1", "n2", "n3"}));
  queue.Close();
  loop->BlockOn(Turns(*loop));  // Run() ends before the queue goes
}

}  // namespace
}  // namespace uxds::testing
