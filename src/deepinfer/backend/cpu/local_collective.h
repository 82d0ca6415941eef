// Ranks as threads of one process (the CPU tests of expert parallelism): all_to_all hands each
// rank's buffers over through shared slots, a two-phase barrier per call.
#pragma once

#include <memory>
#include <vector>

#include "deepinfer/backend/collective.h"

namespace deepinfer::cpu {

// `size` connected ranks (0..size-1), one per thread. A call that waits longer than timeout_s
// for the others fails, naming the ranks that did not arrive, and breaks the group.
std::vector<std::unique_ptr<Collective>> make_local_group(int size, double timeout_s = 60);

}  // namespace deepinfer::cpu
