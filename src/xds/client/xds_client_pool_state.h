// What XdsClientPool and the deleters of its clients share: a client may
// outlive the pool, and must still leave the pool's map and CSDS registry
// when it goes.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "uxds/xds_client.h"
#include "uxds/xds_client_pool.h"
#include "xds/csds/csds_client_registry.h"

namespace uxds::xds_internal {

struct XdsClientPoolState {
  XdsClientPoolState(Loop& loop, Bootstrap bootstrap, XdsClientOptions options)
      : loop(loop), bootstrap(std::move(bootstrap)), options(std::move(options)) {}

  Loop& loop;
  const Bootstrap bootstrap;
  const XdsClientOptions options;
  // A40: every live client of the pool, for its CSDS service.
  const std::shared_ptr<csds::CsdsClientRegistry> csds =
      std::make_shared<csds::CsdsClientRegistry>();
  struct Live {
    std::weak_ptr<XdsClient> client;
    uint64_t order;  // creation order, for Keys()
  };
  std::map<std::string, Live, std::less<>> clients;
  uint64_t created = 0;
};

}  // namespace uxds::xds_internal
