#include "server/serving_status_reporter.h"

#include <utility>

#include "uxds/log.h"

namespace uxds::server {

ServingStatusReporter::ServingStatusReporter(std::string listening_address, Callback callback)
    : listening_address_(std::move(listening_address)), callback_(std::move(callback)) {}

void ServingStatusReporter::SetConfigStatus(Status status) {
  config_status_ = std::move(status);
  Report();
}

void ServingStatusReporter::SetBindStatus(Status status) {
  bind_status_ = std::move(status);
  Report();
}

void ServingStatusReporter::Report() {
  if (closed_ || !config_status_.has_value()) return;
  Status status = *config_status_;
  if (status.ok()) {
    // Serving needs the socket too; before the first bind there is nothing
    // to say yet.
    if (!bind_status_.has_value()) return;
    status = *bind_status_;
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
