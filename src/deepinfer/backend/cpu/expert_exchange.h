// Expert parallelism's dispatch and combine over a Collective (issue 22), shared by both model
// families: every (token, slot) pair goes to the rank the caller picked for it (one holding its
// expert: expert % size, or a replica of an EPLB placement), is computed there, and its output
// comes back into the slot it left from, so the caller sums the slots in its own order exactly as a
// one-rank MoE would.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "deepinfer/backend/collective.h"
#include "deepinfer/base/status.h"

namespace deepinfer::cpu {

struct ExpertPair {
  int32_t token = 0;   // row of h (0..n-1)
  int32_t slot = 0;    // where its output goes (0..K-1): the caller's summation order
  int32_t expert = 0;  // global expert id
  float weight = 0;    // routing weight, passed to `compute`
  int32_t rank = 0;    // the rank that computes it (holds the expert)
};

// One pair on its expert's rank: out[hidden] (zeroed) gets the expert's weighted output for
// the token row `row`.
using ExpertCompute =
    std::function<void(int32_t expert, const float* row, float weight, float* out)>;

struct ExchangeSchedule {
  // Work of the rank's own that needs no exchange (the shared expert); may be empty.
  std::function<void()> local;
  // Two-batch overlap (docs/decisions/0015): the pairs split into two micro-batches (the first
  // half of the list, then the rest: whole tokens for n >= 2, a decode token's slots for n = 1;
  // either may be empty, so every rank makes the same four exchanges whatever its n). `local`
  // runs while both dispatches are on the wire, the first micro-batch's pairs compute while the
  // second's dispatch is, and the second's while the first's combine is. Off: one dispatch, the
  // pairs, one combine, then `local`. Every rank of the group must use the same setting (a
  // mismatch is an error naming the rank).
  bool two_batch = true;
};

// Collective: every rank of `group` calls it with its own n tokens (n >= 0) and their n * K
// pairs, token-major (each (token, slot) once). contrib [n, K, hidden] gets each pair's output at
// (token, slot), the same bits either schedule. Errors are the group's, a pair's rank outside the
// group, or a peer's malformed or mismatched records (named by rank); an error takes the group
// down, since exchanges of this call may be left in flight.
Status exchange_experts(Collective& group, const float* h, int64_t hidden, int64_t n, int K,
                        const std::vector<ExpertPair>& pairs, const ExpertCompute& compute,
                        const ExchangeSchedule& schedule, float* contrib);

}  // namespace deepinfer::cpu
