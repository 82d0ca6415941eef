// Speculative decoding's per-step proposal (drafter.h): before scheduling, each decoding sequence
// gets its drafts in SeqState::spec_row (the sampled token, then the drafts) and their count goes
// to the scheduler, which decides how many it can verify this step. Verification and rollbacks
// are the engine's (engine.cc: verify, roll_back_rejected).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "deepinfer/engine/drafter.h"
#include "deepinfer/engine/request_state.h"
#include "deepinfer/sched/scheduler.h"

namespace deepinfer {

void propose_drafts(Drafter& drafter, int64_t max_drafts,
                    const std::unordered_map<uint64_t, SeqState*>& seqs, sched::Scheduler& sched);

}  // namespace deepinfer
