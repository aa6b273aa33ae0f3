// The XdsClient fuzzer's model of one run: the watchers it registered, what
// the ADS server did, and the checks made after each step:
//  - A88 "Cache Entry States": each watched entry's state, error and
//    resource go together as the spec's state list says, and the server
//    features' rules hold (fail_on_data_errors drops the resource on data
//    errors; without it nothing does; TIMEOUT only with
//    resource_timer_is_transient_error);
//  - A88 agreement: what every watcher was last told (OnResourceChanged,
//    OnAmbientError) matches its entry: the same resource (JSON), the
//    entry's error as an ambient error when a resource is kept, as
//    OnResourceChanged(error) when none is, and while the server is failing
//    (A57: a stream ended without a response) the server's error instead;
//  - the step's own effect: a response sets the states its resources call
//    for (ACKED with its version, NACKED, RECEIVED_ERROR with the TP3 code,
//    LDS/CDS DOES_NOT_EXIST on deletion), is ACKed with its version or
//    NACKed exactly when it held an invalid or duplicate resource (A46),
//    the answer carrying the version accepted (NOTES: a response with a
//    valid resource has its version accepted even when NACKed); a wait past the resource
//    timer turns what was REQUESTED into DOES_NOT_EXIST or TIMEOUT and
//    leaves the rest alone (A57/A88);
//  - every request the server got kept the DiscoveryRequest rules.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/xds_client.h"
#include "uxds/xds_resource_type.h"
#include "xds_fuzz_ads_server.h"
#include "xds_fuzz_program.h"

namespace uxds::fuzz {

// Prints "step N: CHECK: DETAIL" and traps unless `ok` (step -1: outside
// the steps).
void Require(bool ok, int step, std::string_view check, std::string_view detail);

// What a watcher was last told.
class RecordingWatcher final : public XdsUntypedResourceWatcher {
 public:
  void OnResourceChanged(StatusOr<XdsResourceData> resource) override;
  void OnAmbientError(Status status) override;

  XdsResourceData resource;  // null after an error
  Status last_error;         // of the last OnResourceChanged
  Status ambient;            // cleared by OnResourceChanged (A88)
  int changes = 0;
  int notifications = 0;  // of either kind
};

// A response the client must answer (ACK or NACK) before the step is over.
struct PendingAnswer {
  bool active = false;
  int64_t stream = 0;
  std::string type_url;
  std::string version_info;
  std::string nonce;
  bool expect_nack = false;
  bool has_valid_resource = false;
};

class Model {
 public:
  Model(XdsClient& client, FuzzAdsServer& server, Features features)
      : client_(client), server_(server), features_(features) {}

  void BeforeStep(int step, const Step& action);
  void Watch(int type, int name);
  void Cancel(int type, int name);
  PendingAnswer Respond(const Step& action);
  void CloseStream();
  // Why the client has not yet taken in the step ("" once it has).
  std::string Unsettled(const PendingAnswer& pending) const;
  // Every cache entry and what every watcher was told, to see them hold
  // still.
  std::string Fingerprint() const;
  // Every check of the step.
  void AfterStep(int step, const Step& action, const PendingAnswer& pending);
  // Drops the watchers (after the client's Shutdown()).
  void Forget();

 private:
  bool AnyWatch() const;
  void CheckEntry(int step, int type, int name);
  void CheckResponseEffect(int step, const Step& action, const PendingAnswer& pending);
  void CheckTimerEffect(int step);
  void CheckSnapshotHoldsWatchedNames(int step);

  XdsClient& client_;
  FuzzAdsServer& server_;
  const Features features_;
  std::array<std::array<std::vector<std::shared_ptr<RecordingWatcher>>, kNames>, kTypes> watchers_;
  // The entry held a resource since it was created (A88: without
  // fail_on_data_errors it must keep one).
  std::array<std::array<bool, kNames>, kTypes> ever_had_{};
  std::array<std::array<std::optional<XdsResourceSnapshot>, kNames>, kTypes> before_;
  // A57: the last stream ended without a response, none received since.
  bool server_failing_ = false;
  // The version_info of the type's last ACK.
  std::array<std::string, kTypes> accepted_version_;
  // The TP3 code last sent for a name (RECEIVED_ERROR's error).
  std::array<std::array<int, kNames>, kTypes> sent_error_code_{};
};

}  // namespace uxds::fuzz
