// Which model family a checkpoint directory holds, from config.json's model_type.
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer {

enum class ModelFamily {
  kDeepseekV4,   // model_type deepseek_v4 (V4-Flash)
  kDeepseekV41,  // model_type deepseek_v41, or a flat deepseek_v41_text config (V4.1-Flash)
};

const char* model_family_name(ModelFamily family);  // the model_type spelling

// Reads <model_dir>/config.json. Errors name the file, and model_type when it is missing,
// mistyped or unknown.
StatusOr<ModelFamily> detect_model_family(const std::string& model_dir);
StatusOr<ModelFamily> model_family_from_config_json(const std::string& json_text,
                                                    const std::string& origin);

}  // namespace deepinfer
