// Which model directory a command runs on: the argument, else $DEEPINFER_HF_MODEL_DIR, else the
// embedded default tiny model (created on first use).
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::cli {

std::string bundled_tokenizer_dir();
StatusOr<std::string> resolve_model_dir(const std::string& arg);

}  // namespace deepinfer::cli
