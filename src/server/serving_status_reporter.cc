#include "server/serving_status_reporter.h"

#include <utility>

#include "uxds/log.h"

namespace uxds::server {

ServingStatusReporter::ServingStatusReporter(std::string listening_address, Callback callback,
                                             size_t sockets)
    : listening_address_(std::move(listening_address)),
      callback_(std::move(callback)),
      bind_statuses_(sockets) {}

void ServingStatusReporter::SetConfigStatus(Status status) {
  config_status_ = std::move(status);
  Report();
}

void ServingStatusReporter::SetBindStatus(size_t socket, Status status) {
  // The status hides a loop that cannot listen while another one serves:
  // say so once each time that loop's error changes. When no socket
  // listens, the status itself carries the error.
  const std::optional<Status>& previous = bind_statuses_.at(socket);
  const bool changed = !previous.has_value() || previous->code() != status.code() ||
                       previous->message() != status.message();
  bool another_listens = false;
  for (size_t i = 0; i < bind_statuses_.size(); ++i) {
    another_listens = another_listens ||
                      (i != socket && bind_statuses_[i].has_value() && bind_statuses_[i]->ok());
  }
  if (!status.ok() && changed && another_listens && !closed_) {
    Log(LogSeverity::kWarning, "xDS-enabled server " + listening_address_ + ": serving loop " +
                                   std::to_string(socket) +
                                   " cannot listen (the others serve): " + status.ToString());
  }
  bind_statuses_.at(socket) = std::move(status);
  Report();
}

std::optional<Status> ServingStatusReporter::BindStatus() const {
  // The kernel gives new connections only to sockets that listen: one is
  // enough to serve (a loop whose bind failed retries it on its own).
  std::optional<Status> first_error;
  for (const std::optional<Status>& status : bind_statuses_) {
    if (status.has_value() && status->ok()) return Status();
    if (status.has_value() && !first_error.has_value()) first_error = status;
  }
  return first_error;
}

void ServingStatusReporter::Report() {
  if (closed_ || !config_status_.has_value()) return;
  Status status = *config_status_;
  if (status.ok()) {
    // Serving needs the socket too; before the first bind there is nothing
    // to say yet.
    std::optional<Status> bind_status = BindStatus();
    if (!bind_status.has_value()) return;
    status = *std::move(bind_status);
  }
  if (reported_.has_value() && reported_->code() == status.code() &&
      reported_->message() == status.message()) {
    return;
  }
  const bool resumed = status.ok() && reported_.has_value() && !reported_->ok();
  reported_ = status;
  if (callback_) {
    callback_(listening_address_, status);
    return;
  }
  if (!status.ok()) {
    Log(LogSeverity::kWarning,
        "xDS-enabled server " + listening_address_ + " is not serving: " + status.ToString());
  } else if (resumed) {
    Log(LogSeverity::kWarning, "xDS-enabled server " + listening_address_ + " is serving again");
  }
}

}  // namespace uxds::server
