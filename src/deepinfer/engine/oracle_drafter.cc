#include "deepinfer/engine/oracle_drafter.h"

#include <algorithm>

namespace deepinfer {
namespace {

// splitmix64: a uniform in [0, 1) per (seed, prompt, position).
double uniform(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (a * 0x100000001B3ull + b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

}  // namespace

void OracleDrafter::propose(const DraftRequest& r, std::vector<int32_t>* out) {
  if (r.prompt_len < 0 || r.prompt_len > static_cast<int64_t>(r.tokens.size())) return;
  const std::vector<int32_t> prompt(r.tokens.begin(), r.tokens.begin() + r.prompt_len);
  const auto it = known_.find(prompt);
  if (it == known_.end()) return;
  const std::vector<int32_t>& cont = it->second;
  // Draws differ between prompts (FNV-1a over the prompt's ids), not only between positions.
  uint64_t prompt_hash = 0xcbf29ce484222325ull;
  for (int32_t t : prompt)
    prompt_hash = (prompt_hash ^ static_cast<uint32_t>(t)) * 0x100000001b3ull;
  // Drafts follow the known tokens: generated[g] is the last (sampled, not yet computed) one.
  const int64_t g = static_cast<int64_t>(r.tokens.size()) - r.prompt_len;
  for (int64_t i = 0; i < r.max_drafts && g + i < static_cast<int64_t>(cont.size()); ++i) {
    const int64_t pos = g + i;
    int32_t t = cont[static_cast<size_t>(pos)];
    if (uniform(seed_, prompt_hash, static_cast<uint64_t>(pos)) >= accept_rate_)
      t = static_cast<int32_t>((int64_t{t} + 1) % vocab_);
    out->push_back(t);
  }
}

}  // namespace deepinfer
