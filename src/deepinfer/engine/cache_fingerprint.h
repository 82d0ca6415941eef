// What the prefix cache's key chain is rooted in: a string that differs whenever cached state
// could differ for the same tokens. Units of one fingerprint are never loaded under another,
// in any tier (their keys differ, and unit files carry its hash).
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/page_spec.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer {

// The model (config.json's bytes; each *.safetensors file's name, size, header and sampled
// content), the runner (device, numerics) and the page layout. The weights are sampled, not
// hashed whole (that would read 149 GiB at every start): 64 KiB at 8 evenly spaced offsets per
// file, so a checkpoint changed only between the samples would alias its parent; the salt
// (--kv-cache-salt) separates such checkpoints. Errors name the file.
StatusOr<std::string> cache_fingerprint(const std::string& model_dir,
                                        const runtime::ModelInfo& info, const kv::PageSpec& spec,
                                        const std::string& salt);

}  // namespace deepinfer
