// The drafter behind DEEPINFER_ENABLE_MTP_VARLEN: the runner's own drafter (V4's MTP layer,
// V4.1's DSpark) proposes the tokens after each decoding sequence's sampled one
// (ModelRunner::mtp_draft). A runner or checkpoint without one turns it off for good, with one
// line on stderr saying why; a sequence whose state the runner does not hold (just preempted) or
// whose drafter state it is rebuilding gets no drafts that step.
#pragma once

#include <cstdio>
#include <string>

#include "deepinfer/engine/drafter.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer {

class MtpDrafter : public Drafter {
 public:
  explicit MtpDrafter(runtime::ModelRunner* runner) : runner_(runner) {}
  // One sequence: the batched path with one request (the engine asks propose_all).
  void propose(const DraftRequest& r, std::vector<int32_t>* out) override {
    std::vector<std::vector<int32_t>> one;
    propose_all({r}, &one);
    out->insert(out->end(), one[0].begin(), one[0].end());
  }
  // One runner call for the step (ModelRunner::mtp_draft_batch): a device drafts every
  // sequence's next tokens together. A failed call leaves every sequence without drafts.
  void propose_all(const std::vector<DraftRequest>& requests,
                   std::vector<std::vector<int32_t>>* out) override {
    out->assign(requests.size(), {});
    if (off_ || requests.empty()) return;
    ids_.clear();
    tokens_.clear();
    max_drafts_.clear();
    for (const DraftRequest& r : requests) {
      ids_.push_back(r.seq_id);
      tokens_.push_back(r.tokens.empty() ? -1 : r.tokens.back());
      max_drafts_.push_back(r.tokens.empty() ? 0 : r.max_drafts);
    }
    const Status st = runner_->mtp_draft_batch(ids_, tokens_, max_drafts_, out);
    if (st.ok()) return;
    out->assign(requests.size(), {});
    if (st.code() != StatusCode::kUnimplemented) return;
    off_ = true;
    std::fprintf(stderr, "deepinfer: MTP/DSpark speculative decoding off: %s\n",
                 st.message().c_str());
  }

 private:
  std::vector<uint64_t> ids_;
  std::vector<int32_t> tokens_;
  std::vector<int64_t> max_drafts_;
  runtime::ModelRunner* runner_;
  bool off_ = false;
};

}  // namespace deepinfer
