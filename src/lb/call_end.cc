// How the end of a call picked kComplete is given back to what its pick
// counted it in (include/uxds/channel.h): cluster_impl's A32 counter and
// locality load (A42 LRS), least_request's endpoint count (A48).
#include "lb/call_counter.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

void CallEnded(CallCounter* counter) {
  if (counter != nullptr) counter->Release();
}

void CallFinished(const PickResult& picked, bool ok) {
  if (picked.call_counter != nullptr) picked.call_counter->Release();
  if (picked.endpoint_calls != nullptr) picked.endpoint_calls->Release();
  if (picked.locality_stats != nullptr) picked.locality_stats->CallFinished(ok);
}

void CallNotStarted(const PickResult& picked) {
  if (picked.call_counter != nullptr) picked.call_counter->Release();
  if (picked.endpoint_calls != nullptr) picked.endpoint_calls->Release();
  if (picked.locality_stats != nullptr) picked.locality_stats->CallNotStarted();
}

}  // namespace uxds
