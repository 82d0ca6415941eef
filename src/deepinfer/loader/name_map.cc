#include "deepinfer/loader/name_map.h"

namespace deepinfer {
namespace {

// Whole names after the "model." prefix is gone. The HF-saved spellings here come from spec
// §3.1 (PrimeRL's notes on a save_pretrained checkpoint); none collides with a Hub name.
struct WholeName {
  std::string_view from, to;
};
constexpr WholeName kWholeNames[] = {
    {"lm_head.weight", "head.weight"},     {"embed_tokens.weight", "embed.weight"},
    {"hc_head.hc_fn", "hc_head_fn"},       {"hc_head.hc_base", "hc_head_base"},
    {"hc_head.hc_scale", "hc_head_scale"},
};

// Runs of whole dot-separated components, replaced wherever they start a component.
struct ComponentRun {
  std::string_view from, to;
};
constexpr ComponentRun kComponentRuns[] = {
    {"attn.norm.", "attn.kv_norm."},
};

}  // namespace

std::string canonical_tensor_name(std::string_view name) {
  constexpr std::string_view kModelPrefix = "model.";
  if (name.starts_with(kModelPrefix)) name.remove_prefix(kModelPrefix.size());
  for (const WholeName& w : kWholeNames) {
    if (name == w.from) return std::string(w.to);
  }
  std::string out(name);
  for (const ComponentRun& r : kComponentRuns) {
    size_t pos = 0;
    while ((pos = out.find(r.from, pos)) != std::string::npos) {
      if (pos == 0 || out[pos - 1] == '.') {
        out.replace(pos, r.from.size(), r.to);
        pos += r.to.size();
      } else {
        pos += 1;
      }
    }
  }
  return out;
}

}  // namespace deepinfer
