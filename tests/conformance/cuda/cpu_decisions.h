// The CPU reference's discrete choices at every position of one prefill (biased MoE routing,
// the CSA indexer's top-k; spec §6.7, §6.8), with how close each came to going the other way,
// and the first place a GPU DecisionTrace chose differently. A bf16 GPU run may flip a choice
// whose candidates are within bf16 rounding of each other, and from there it legitimately
// diverges; a flip with a clear gap is a bug. Mirrors CpuModel::forward (cpu_model.cc) with
// the public sub-layer functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v4/mhc.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"

namespace deepinfer::cuda::choices {

// Per layer and position: the chosen set (sorted) and the gap between the last chosen and the
// first rejected candidate, relative to the largest |candidate| (infinity: nothing rejected).
struct LayerDecisions {
  std::vector<std::vector<int32_t>> experts, selected;
  std::vector<double> expert_gap, index_gap;
};

inline double relative_topk_gap(const std::vector<float>& v, int k) {
  if (static_cast<int>(v.size()) <= k) return std::numeric_limits<double>::infinity();
  std::vector<float> s(v);
  std::sort(s.begin(), s.end(), std::greater<float>());
  double scale = 0;
  for (float x : v) scale = std::max(scale, std::fabs(double(x)));
  return scale > 0 ? (double(s[k - 1]) - s[k]) / scale : 0.0;
}

inline std::vector<LayerDecisions> cpu_decisions(const v4::Config& c, const v4::Weights& w,
                                                 const std::vector<int32_t>& ids) {
  using namespace v4;
  ModelContext m{c,
                 w,
                 Numerics::kPlain,
                 true,
                 RopeTable(c.rope_theta, c.rope_dim, nullptr),
                 RopeTable(c.compress_rope_theta, c.rope_dim, &c.yarn)};
  SequenceState st = make_sequence_state(c);
  const int64_t n = static_cast<int64_t>(ids.size()), H = c.hidden_size;
  const int hc = c.hc_mult;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<LayerDecisions> out(c.num_layers);
  std::vector<float> X(n * hc * H), y(n * H), post(n * hc), comb(n * hc * hc), f(n * H);
  const float* embed = w.f("embed.weight");
  for (int64_t t = 0; t < n; ++t)
    for (int j = 0; j < hc; ++j)
      std::copy(embed + int64_t(ids[t]) * H, embed + int64_t(ids[t] + 1) * H, &X[(t * hc + j) * H]);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int ratio = c.compress_ratio(l);
    LayerDecisions& d = out[l];
    for (const std::string s : {"attn", "ffn"}) {
      HcWeights hw{w.f(p + "hc_" + s + "_fn"), w.f(p + "hc_" + s + "_base"),
                   w.f(p + "hc_" + s + "_scale")};
      for (int64_t t = 0; t < n; ++t) {
        hc_pre(c, hw, &X[t * hc * H], &y[t * H], &post[t * hc], &comb[t * hc * hc]);
        cpu::rms_norm(&y[t * H], w.f(p + s + "_norm.weight"), H, eps, &y[t * H]);
      }
      if (s == "attn") {
        attention_forward(m, p, ratio, y.data(), n, 0, st.layers[l], f.data());
        if (ratio == 4) {  // the indexer's scores, as attention.cc's indexer_topk
          const int ih = c.index_n_heads, ihd = c.index_head_dim;
          const int64_t ql = c.q_lora_rank;
          std::vector<float> qr(ql), q(int64_t(ih) * ihd), wts(ih);
          for (int64_t t = 0; t < n; ++t) {
            cpu::linear(w.f(p + "attn.wq_a.weight"), ql, H, &y[t * H], 1, qr.data());
            cpu::rms_norm(qr.data(), w.f(p + "attn.q_norm.weight"), ql, eps, qr.data());
            cpu::linear(w.f(p + "attn.indexer.wq_b.weight"), int64_t(ih) * ihd, ql, qr.data(), 1,
                        q.data());
            for (int hh = 0; hh < ih; ++hh)
              m.compress_rope.rotate(q.data() + int64_t(hh) * ihd + ihd - c.rope_dim, t);
            cpu::linear(w.f(p + "attn.indexer.weights_proj.weight"), ih, H, &y[t * H], 1,
                        wts.data());
            std::vector<float> score((t + 1) / 4);
            for (size_t e = 0; e < score.size(); ++e)
              score[e] =
                  cpu::indexer_score(q.data(), wts.data(), st.layers[l].index.entries[e], ih, ihd,
                                     1.0f / std::sqrt(float(ih)), 1.0f / std::sqrt(float(ihd)));
            std::vector<int64_t> pick =
                cpu::top_k_indices(score.data(), int64_t(score.size()), c.index_topk);
            d.selected.emplace_back(pick.begin(), pick.end());
            std::sort(d.selected.back().begin(), d.selected.back().end());
            d.index_gap.push_back(relative_topk_gap(score, c.index_topk));
          }
        }
      } else {
        if (!c.is_hash_layer(l)) {
          const int E = c.n_routed_experts, K = c.experts_per_token;
          std::vector<float> logits(n * E), sel(E), wts(K);
          std::vector<int> idx(K);
          const float* bias = w.f(p + "ffn.gate.bias");
          cpu::linear(w.f(p + "ffn.gate.weight"), E, H, y.data(), n, logits.data());
          for (int64_t t = 0; t < n; ++t) {
            route_token(&logits[t * E], bias, nullptr, E, K,
                        static_cast<float>(c.routed_scaling_factor), idx.data(), wts.data());
            d.experts.emplace_back(idx.begin(), idx.end());
            std::sort(d.experts.back().begin(), d.experts.back().end());
            for (int x = 0; x < E; ++x)
              sel[x] = std::sqrt(cpu::softplus(logits[t * E + x])) + bias[x];
            d.expert_gap.push_back(relative_topk_gap(sel, K));
          }
        }
        moe_forward(m, p, c.is_hash_layer(l), y.data(), ids.data(), n, f.data());
      }
      for (int64_t t = 0; t < n; ++t)
        hc_post(c, &f[t * H], &post[t * hc], &comb[t * hc * hc], &X[t * hc * H]);
    }
  }
  return out;
}

struct Flip {
  int64_t pos = std::numeric_limits<int64_t>::max();  // none
  int layer = -1;
  std::string kind;
  double gap = 0;  // the CPU's relative gap at that choice
  bool found() const { return layer >= 0; }
  std::string describe() const {
    return found() ? "layer " + std::to_string(layer) + " " + kind + " at position " +
                         std::to_string(pos) + " (CPU relative gap " + std::to_string(gap) + ")"
                   : "no decision differs";
  }
};

// The earliest position (then layer) where the GPU chose a different set than the CPU.
inline Flip first_flip(const std::vector<LayerDecisions>& cpu, const DecisionTrace& gpu) {
  Flip f;
  auto consider = [&](int l, const char* kind, const std::vector<std::vector<int32_t>>& want,
                      const std::vector<int32_t>& got, const std::vector<double>& gap) {
    if (want.empty()) return;
    const size_t per = got.size() / want.size();
    for (size_t t = 0; t < want.size() && int64_t(t) < f.pos; ++t) {
      std::vector<int32_t> g;
      for (size_t k = 0; k < per; ++k)
        if (got[t * per + k] >= 0) g.push_back(got[t * per + k]);
      std::sort(g.begin(), g.end());
      if (g != want[t]) {
        f = {int64_t(t), l, kind, gap[t]};
        return;
      }
    }
  };
  for (size_t l = 0; l < cpu.size(); ++l) {
    consider(int(l), "routing", cpu[l].experts, gpu.experts[l], cpu[l].expert_gap);
    consider(int(l), "indexer top-k", cpu[l].selected, gpu.selected[l], cpu[l].index_gap);
  }
  return f;
}

}  // namespace deepinfer::cuda::choices
