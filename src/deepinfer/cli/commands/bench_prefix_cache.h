// `deepinfer bench prefix-cache`: time to first token of one long prompt on a miss and on a
// full hit from each tier (device, host, disk), the bytes a stored unit takes per token next to
// the model's state size (spec §7), and the host and disk tiers' load bandwidth, the disk's
// next to a sequential read of the same files in the same run.
#pragma once

#include <string>

#include "deepinfer/engine/engine.h"

namespace deepinfer::cli {

int run_prefix_cache_bench(const std::string& model_arg, int input_len, std::string json_path,
                           EngineArgs args);

}  // namespace deepinfer::cli
