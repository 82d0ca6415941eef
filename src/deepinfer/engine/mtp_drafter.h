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
  void propose(const DraftRequest& r, std::vector<int32_t>* out) override {
    if (off_ || r.tokens.empty()) return;
    const size_t before = out->size();
    const Status st = runner_->mtp_draft(r.seq_id, r.tokens.back(), r.max_drafts, out);
    if (st.ok()) return;
    out->resize(before);
    if (st.code() == StatusCode::kUnimplemented) {
      off_ = true;
      std::fprintf(stderr, "deepinfer: MTP/DSpark speculative decoding off: %s\n",
                   st.message().c_str());
    }
  }

 private:
  runtime::ModelRunner* runner_;
  bool off_ = false;
};

}  // namespace deepinfer
