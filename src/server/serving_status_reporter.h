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
#include <vector>

#include "uxds/status.h"

namespace uxds::server {

class ServingStatusReporter {
 public:
  using Callback = std::function<void(std::string_view listening_address, const Status& status)>;
  // `sockets`: how many listening sockets (one per serving loop) must
  // listen for the server to serve.
  ServingStatusReporter(std::string listening_address, Callback callback, size_t sockets = 1);

  // A configuration is applied (OK), or the reason none is.
  void SetConfigStatus(Status status);
  // The last bind result of socket `socket` (< sockets).
  void SetBindStatus(size_t socket, Status status);
  // No report after this (the server is shutting down).
  void Close() { closed_ = true; }

 private:
  void Report();

  const std::string listening_address_;
  Callback callback_;
  std::optional<Status> config_status_;  // nullopt: nothing received yet
  // OK once any socket listens; else the first error; nullopt: no bind
  // result yet.
  std::optional<Status> BindStatus() const;

  std::vector<std::optional<Status>> bind_statuses_;  // per socket; nullopt: not tried yet
  std::optional<Status> reported_;
  bool closed_ = false;
};

}  // namespace uxds::server
