#include "deepinfer/backend/cuda/forward/device_weights.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename Map>
auto* find_or_die(const Map& m, const std::string& name, const char* kind) {
  auto it = m.find(name);
  if (it == m.end()) {
    std::fprintf(stderr, "cuda forward: no %s device tensor '%s'\n", kind, name.c_str());
    std::abort();
  }
  return it->second.get();
}

}  // namespace

bool is_bf16_projection(const std::string& name) {
  // The router (ffn.gate.weight) stays fp32: MoE top-k is a discrete choice (see Gemm::f32).
  for (const char* s :
       {"wq_a.weight", "wq_b.weight", "wkv.weight", "wo_a.weight", "wo_b.weight", "wgate.weight",
        "weights_proj.weight", "w1.weight", "w2.weight", "w3.weight", "head.weight"})
    if (ends_with(name, s)) return true;
  return false;
}

DeviceWeights::DeviceWeights(const v4::Config& c, const v4::Weights& w) {
  for (const v4::WeightSpec& s : v4::weight_manifest(c)) {
    if (s.name.rfind("mtp.", 0) == 0) continue;
    if (s.kind == v4::WeightKind::kIndex) {
      const int32_t* p = w.i(s.name);
      int64_t numel = 1;
      for (int64_t d : s.shape) numel *= d;
      i32_.emplace(s.name, DeviceBuffer<int32_t>(std::vector<int32_t>(p, p + numel)));
      bytes_ += numel * 4;
      continue;
    }
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    const float* p = w.f(s.name);
    if (is_bf16_projection(s.name)) {
      std::vector<uint16_t> bits(numel);
      for (int64_t k = 0; k < numel; ++k) bits[k] = float_to_bf16(p[k]);
      bf16_.emplace(s.name, DeviceBuffer<uint16_t>(bits));
      bytes_ += numel * 2;
    } else {
      f32_.emplace(s.name, DeviceBuffer<float>(std::vector<float>(p, p + numel)));
      bytes_ += numel * 4;
    }
  }
}

const __nv_bfloat16* DeviceWeights::bf16(const std::string& name) const {
  return reinterpret_cast<const __nv_bfloat16*>(find_or_die(bf16_, name, "bf16"));
}
const float* DeviceWeights::f(const std::string& name) const {
  return find_or_die(f32_, name, "fp32");
}
const int32_t* DeviceWeights::i(const std::string& name) const {
  return find_or_die(i32_, name, "int32");
}

}  // namespace deepinfer::cuda
