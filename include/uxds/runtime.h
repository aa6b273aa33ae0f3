// The uxds runtime: io_uring loop, coroutine tasks, cancellation, timers.
#pragma once

#include "uxds/cancel.h"
#include "uxds/log.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
