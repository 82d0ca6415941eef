#include "deepinfer/runtime/cuda/forward_v41/v41_forward.h"

namespace deepinfer::cuda::v41f {

MoeSpec v41_moe_spec(const v41::Config& c, int experts, int top_k) {
  MoeSpec m;
  m.hidden = c.hidden_size;
  m.inter = c.moe_intermediate_size;
  m.shared_inter = int64_t(c.moe_intermediate_size) * c.n_shared_experts;
  m.experts = experts;
  m.top_k = top_k;
  m.route_scale = static_cast<float>(c.routed_scaling_factor);
  m.temperature = static_cast<float>(c.gate_temp);
  m.swiglu_limit = static_cast<float>(c.swiglu_limit);
  m.normalize = c.norm_topk_prob && top_k > 1;
  m.clamp_shared = true;      // V4.1 clamps the shared expert too
  m.weight_before_w2 = true;  // and scales the activation before w2
  return m;
}

}  // namespace deepinfer::cuda::v41f
