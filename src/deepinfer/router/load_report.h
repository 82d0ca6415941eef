// A worker's GET /load answer: {"role", "num_running", "num_waiting", "kv_usage",
// "max_num_seqs"}, read into the fields the decode policy weighs.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/router/policy.h"

namespace deepinfer::router {

// The four numbers into `out` (load_known set); an error names the field that is missing or out
// of range, and `out` is left as it was.
Status parse_load_report(std::string_view body, WorkerLoad& out);

}  // namespace deepinfer::router
