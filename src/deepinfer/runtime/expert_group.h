// Forms an expert-parallel group for the runner (issue 22): the engine asks for one by rank,
// size and rank 0's address, and hands it to the runner (RunnerOptions::expert_group). Over TCP
// on the CPU (backend/cpu/tcp_collective.h); NCCL's when a multi-GPU machine is lent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/backend/collective.h"
#include "deepinfer/base/status.h"

namespace deepinfer::runtime {

struct ExpertGroupOptions {
  int size = 1;
  int rank = 0;
  std::string address = "127.0.0.1:29500";  // rank 0's host:port (it listens there)
  double timeout_s = 60;                    // joining, and each wait of a step's exchanges
};

// Blocks until every rank has joined (or the timeout). Errors name the flag or the ranks
// missing.
StatusOr<std::unique_ptr<Collective>> join_expert_group(const ExpertGroupOptions& o);

// Collective: the largest of every rank's `mine` (the busiest rank's row count in a step; any
// rank with work, as 0/1). Errors are the group's, or a malformed answer.
StatusOr<int64_t> group_max(Collective& group, int64_t mine);

}  // namespace deepinfer::runtime
