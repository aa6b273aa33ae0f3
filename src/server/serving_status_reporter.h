// ServingStatusReporter: what an xDS-enabled server says about its serving
// state (A36). Two sources decide it: the configuration (control thread) and
// the listening socket's bind (serving loop, reported through Loop::Post).
// The server serves when both are good; every change of the resulting
// status goes to the application's callback, or, without one, to the log
// ("log any errors and each serving resumption after an error").
//
// Control thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "uxds/status.h"

namespace uxds::server {

class ServingStatusReporter {
 public:
  using Callback = std::function<void(std::string_view listening_address, const Status& status)>;
  ServingStatusReporter(std::string listening_address, Callback callback);

  // A configuration is applied (OK), or the reason none is.
  void SetConfigStatus(Status status);
  // The last bind result.
  void SetBindStatus(Status status);
  // No report after this (the server is shutting down).
  void Close() { closed_ = true; }

 private:
  void Report();

  const std::string listening_address_;
  Callback callback_;
  std::optional<Status> config_status_;  // nullopt: nothing received yet
  std::optional<Status> bind_status_;    // nullopt: no bind attempted yet
  std::optional<Status> reported_;
  bool closed_ = false;
};

}  // namespace uxds::server
