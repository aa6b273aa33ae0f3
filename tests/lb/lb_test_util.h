// Shared pieces of the LB tests: real backends on loopback whose states the
// tests drive (a uxds HTTP/2 server that can stop and restart on its port, a
// port that refuses, a listener that never answers), and waits on states.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "http2/http2_test_util.h"
#include "http2/server.h"
#include "lb/lb_policy.h"
#include "lb/subchannel.h"
#include "runtime/socket_address.h"
#include "support/loopback_sockets.h"
#include "uxds/loop.h"

namespace uxds::lb_testing {

using http2::testing::WaitUntil;

// A uxds HTTP/2 server on 127.0.0.1; Start() after Stop() binds the same
// port again, so subchannels to it recover.
class Backend {
 public:
  explicit Backend(Loop& loop);
  ~Backend();
  Status Start();
  // Drains (GOAWAY, calls finish within `grace`), then stops.
  Task<void> Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // The test service's probe ("/test.Echo/Hold" waits for probe().release).
  http2::testing::ServiceProbe& probe() { return probe_; }
  bool running() const { return server_ != nullptr; }
  SocketAddress address() const { return SocketAddress::Loopback4(port_); }
  std::string address_text() const { return address().ToString(); }

 private:
  Loop& loop_;
  uint16_t port_ = 0;
  http2::testing::ServiceProbe probe_;
  std::shared_ptr<http2::ServiceRegistry> registry_;
  std::unique_ptr<http2::Server> server_;
  std::unique_ptr<TaskGroup> serving_;
};

// Refused and silent loopback endpoints (tests/support/loopback_sockets.h).
using testing::Blackhole;
using testing::RefusedAddress;

// Subchannel options with test-sized backoff (100 ms, x1.6, no jitter).
SubchannelOptions FastSubchannelOptions();

// Waits (running the loop) until `s` shows `state`.
Task<bool> WaitForState(Loop& loop, Subchannel* s, ConnectivityState state,
                        std::chrono::milliseconds limit = std::chrono::seconds(10));

// One locality holding `addresses` with weight 1 each.
LocalityList OneLocality(const std::vector<SocketAddress>& addresses, uint32_t locality_weight = 1,
                         const std::string& name = "{region=\"r\", zone=\"z\", sub_zone=\"\"}");

// A picker that fails every pick with a status naming its tag: tells the
// tests whose picker a parent published.
class TaggedPicker final : public Picker {
 public:
  explicit TaggedPicker(int tag)
      : tag_(tag), status_(UnavailableError("picker " + std::to_string(tag))) {}
  PickResult Pick(const PickArgs&) const override { return PickResult::Fail(&status_); }
  int tag() const { return tag_; }

 private:
  int tag_;
  Status status_;
};

// Records what a policy reports.
struct ReportLog {
  ConnectivityState state = ConnectivityState::kIdle;
  Status status;
  std::shared_ptr<const Picker> picker;
  int reports = 0;
  LbPolicy::Reporter reporter() {
    return [this](ConnectivityState s, const Status& st, std::shared_ptr<const Picker> p) {
      state = s;
      status = st;
      picker = std::move(p);
      ++reports;
    };
  }
};

}  // namespace uxds::lb_testing
