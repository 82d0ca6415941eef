// V4.1's Engram gate (spec §11.2.7, model/deepseek_v41/engram.cc) over n tokens: kv = wkv(the
// token's gathered table rows) holds hc keys then one shared value ([n, (hc + 1) * hidden]); per
// stream j of X ([n, hc, hidden]), gate_j = sigmoid(signed sqrt(max(|s|, 1e-6))) of
// s = (x . (q_w[j] * k_w[j]) . key_j) * rstd(x) * rstd(key_j) / sqrt(hidden), and x += gate_j *
// value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

void engram_gate(const float* kv, const float* q_weight, const float* k_weight, int64_t n, int hc,
                 int64_t hidden, float eps, float* X, cudaStream_t stream);

}  // namespace deepinfer::cuda
