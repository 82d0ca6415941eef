#include "deepinfer/cli/model_resolver.h"

#include <cstdlib>
#include <iostream>

#include "deepinfer/model/deepseek_v4/tiny_model.h"

namespace deepinfer::cli {

std::string bundled_tokenizer_dir() {
  const char* env = std::getenv("DEEPINFER_ASSETS_DIR");
  return std::string(env ? env : DEEPINFER_ASSETS_DIR) + "/tokenizers/deepseek_v3";
}

StatusOr<std::string> resolve_model_dir(const std::string& arg) {
  if (!arg.empty()) return arg;
  if (const char* env = std::getenv("DEEPINFER_HF_MODEL_DIR"); env && *env) return std::string(env);
  ASSIGN_OR_RETURN(std::string dir, v4::ensure_default_model(bundled_tokenizer_dir()));
  return dir;
}

}  // namespace deepinfer::cli
