// The transport's name for uxds::AsyncCondition (include/uxds/async_condition.h).
#pragma once

#include "uxds/async_condition.h"

namespace uxds::http2 {

using ::uxds::AsyncCondition;

}  // namespace uxds::http2
