// A drafter that knows each prompt's continuation (recorded from a run without speculation) and
// proposes it, each draft replaced by another token with probability 1 - accept_rate (drawn
// per position from a fixed seed, so a run replays). With the target's own greedy continuation
// this is the oracle of issue 19's `--spec-oracle-accept`: it isolates what verification costs
// and buys from how good a real drafter is.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "deepinfer/engine/drafter.h"

namespace deepinfer {

class OracleDrafter : public Drafter {
 public:
  OracleDrafter(double accept_rate, uint64_t seed, int64_t vocab_size)
      : accept_rate_(accept_rate), seed_(seed), vocab_(vocab_size) {}
  // The continuation of `prompt` (its generated tokens, in order).
  void add(const std::vector<int32_t>& prompt, std::vector<int32_t> continuation) {
    known_[prompt] = std::move(continuation);
  }
  void propose(const DraftRequest& r, std::vector<int32_t>* out) override;

 private:
  double accept_rate_;
  uint64_t seed_;
  int64_t vocab_;
  std::map<std::vector<int32_t>, std::vector<int32_t>> known_;
};

}  // namespace deepinfer
