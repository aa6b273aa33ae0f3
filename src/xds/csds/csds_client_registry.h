// CsdsClientRegistry: the XdsClients a CSDS service reports on (A40).
//
// A process has one XdsClient per data-plane target (A71/A47) plus one for
// its xDS-enabled servers, each on its own control loop. The CSDS service
// answers with one ClientConfig per client, so it needs a list of them that
// clients join and leave while servers on other loops read it:
//
//   auto clients = std::make_shared<CsdsClientRegistry>();
//   CsdsClientRegistry::Registration registration = clients->Add(*xds_client);
//   RegisterCsdsService(service_registry, clients);  // csds_service.h
//   ...
//   registration.Reset();  // before the client is shut down and destroyed
//
// Threads: Add(), Registration::Reset() and Fetch() may be called from any
// thread. A client is only ever touched on its own loop: Fetch() posts the
// dump there and is woken on the caller's loop when every dump has arrived.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "envoy/service/status/v3/csds.pb.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"

namespace uxds::csds {

class CsdsClientRegistry {
 private:
  struct Entry;

 public:
  // Keeps one client in the registry; Reset() or destruction takes it out.
  // Once that returns no dump of the client runs or will run, so the client
  // may then be shut down and destroyed.
  class [[nodiscard]] Registration {
   public:
    Registration() = default;
    Registration(Registration&& other) noexcept = default;
    Registration& operator=(Registration&& other) noexcept;
    ~Registration() { Reset(); }

    void Reset();
    bool active() const { return entry_ != nullptr; }

   private:
    friend class CsdsClientRegistry;
    explicit Registration(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}
    std::shared_ptr<Entry> entry_;
  };

  CsdsClientRegistry() = default;
  CsdsClientRegistry(const CsdsClientRegistry&) = delete;
  CsdsClientRegistry& operator=(const CsdsClientRegistry&) = delete;

  // Adds `client`; it must stay alive (with its loop) while the returned
  // registration is active. Clients are reported in the order they were added.
  Registration Add(XdsClient& client);

  // The clients registered now.
  size_t size() const;

  // A40: one ClientConfig per registered client (node, generic_xds_configs,
  // client_scope), each dumped on its client's loop; `loop` is the loop the
  // awaiting task runs on. A client that leaves before its dump ran is left
  // out. With exclude_resource_contents the resources themselves
  // (xds_config) are dropped and only their status is reported. CANCELLED
  // when the awaiting task is cancelled first.
  Task<StatusOr<envoy::service::status::v3::ClientStatusResponse>> Fetch(
      Loop& loop, bool exclude_resource_contents = false);

 private:
  struct FetchState;
  class PendingDump;

  // The live entries, in the order they were added; drops departed ones.
  std::vector<std::shared_ptr<Entry>> LiveEntries();
  // Posts the dump of entries[i] to its client's loop. False if the client
  // has left already.
  static bool PostDump(const std::shared_ptr<Entry>& entry,
                       const std::shared_ptr<FetchState>& state, size_t index);

  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;
};

}  // namespace uxds::csds
