// Speculative decoding's proposer (issue 19): before each step the engine asks it for up to
// max_drafts tokens to follow a decoding sequence's known tokens. The engine then verifies them in
// one target forward (a speculative row), sampling each position exactly as a plain decode would
// and accepting a draft when the sampled token equals it: greedy or seeded outputs are the same
// with and without a drafter, whatever it proposes, and only the step count changes.
//
// MtpDrafter (mtp_drafter.h) asks the runner's own drafter (ModelRunner::mtp_draft; the CPU
// runner so far): V4's MTP layer or V4.1's DSpark. OracleDrafter (oracle_drafter.h) replays a known
// continuation at a chosen acceptance rate, for tests and for measuring what verification buys.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

struct DraftRequest {
  uint64_t seq_id = 0;              // the engine's sequence (the runner's id for its state)
  std::span<const int32_t> tokens;  // prompt + generated so far (the last one not computed yet)
  int64_t prompt_len = 0;
  int64_t max_drafts = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends at most r.max_drafts tokens to *out (none: a plain decode). Called on the engine
  // thread only.
  virtual void propose(const DraftRequest& r, std::vector<int32_t>* out) = 0;
  // Every decoding sequence's drafts for one step: (*out)[i] gets requests[i]'s, as propose
  // would. A drafter that runs on the device drafts them together (MtpDrafter).
  virtual void propose_all(const std::vector<DraftRequest>& requests,
                           std::vector<std::vector<int32_t>>* out) {
    out->assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i) propose(requests[i], &(*out)[i]);
  }
};

}  // namespace deepinfer
