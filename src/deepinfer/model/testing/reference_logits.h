// Tests only (header-only): the CPU reference's last-position logits after a token prefix, in
// plain numerics (what the GPU forward computes), for either family by config.json's
// model_type. Each directory's model is loaded once per process and kept.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/model_family.h"

namespace deepinfer::model_testing {

// One family's models by directory (Options: that family's ModelOptions).
template <class Model, class Options>
Status last_logits_of(std::map<std::string, std::unique_ptr<Model>>& models, const std::string& dir,
                      const std::vector<int32_t>& prefix, std::vector<float>* logits) {
  auto& m = models[dir];
  if (!m) {
    Options o;
    o.numerics = v4::Numerics::kPlain;
    ASSIGN_OR_RETURN(m, Model::load(dir, o));
  }
  auto st = m->new_sequence();
  return m->forward(st, prefix.data(), static_cast<int64_t>(prefix.size()), false, logits);
}

inline Status reference_last_logits(const std::string& dir, const std::vector<int32_t>& prefix,
                                    std::vector<float>* logits) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<v4::CpuModel>> v4_models;
  static std::map<std::string, std::unique_ptr<v41::CpuModel>> v41_models;
  std::lock_guard<std::mutex> lock(mu);
  ASSIGN_OR_RETURN(const ModelFamily family, detect_model_family(dir));
  if (family == ModelFamily::kDeepseekV41)
    return last_logits_of<v41::CpuModel, v41::ModelOptions>(v41_models, dir, prefix, logits);
  return last_logits_of<v4::CpuModel, v4::ModelOptions>(v4_models, dir, prefix, logits);
}

}  // namespace deepinfer::model_testing
