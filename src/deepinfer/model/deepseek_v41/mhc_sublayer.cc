// The deferred-mHC site both the backbone blocks and the DSpark stages run (spec §11.2.1).
#include <algorithm>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v4/mhc.h"
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

void mhc_sublayer(const ModelContext& m, const std::string& p, const std::string& site, float* X,
                  float* pre, int64_t t0, int64_t n, const Sublayer& sublayer) {
  if (t0 >= n) return;
  const Config& c = m.c;
  const v4::HcDims d{c.hc_mult, c.hidden_size, c.hc_sinkhorn_iters, m.eps(),
                     static_cast<float>(c.hc_eps)};
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  const v4::HcWeights hw{m.f(p + "hc_" + site + "_fn"), m.f(p + "hc_" + site + "_base"),
                         m.f(p + "hc_" + site + "_scale")};
  const float* norm = m.f(p + site + "_norm.weight");
  std::vector<float> y(n * H), site_pre(n * hc), post(n * hc), comb(n * hc * hc), f(n * H);
  for (int64_t t = t0; t < n; ++t) {  // every row is independent here
    const float* Xt = X + t * hc * H;
    v4::hc_mixes(d, hw, Xt, &site_pre[t * hc], &post[t * hc], &comb[t * hc * hc]);
    v4::hc_collapse(d, &pre[t * hc], Xt, &y[t * H]);
    cpu::rms_norm(&y[t * H], norm, H, m.eps(), &y[t * H]);
  }
  std::copy(site_pre.begin() + t0 * hc, site_pre.end(), pre + t0 * hc);
  sublayer(&y[t0 * H], n - t0, &f[t0 * H]);
  for (int64_t t = t0; t < n; ++t)
    v4::hc_expand(d, &f[t * H], &post[t * hc], &comb[t * hc * hc], X + t * hc * H);
}

}  // namespace deepinfer::v41
