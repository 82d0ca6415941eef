// A group of ranks that exchange bytes: expert parallelism's dispatch and combine (issue 22).
// Collective: every rank of the group makes the same calls in the same order. Implementations:
// cpu/local_collective.h (ranks as threads of one process, for the CPU tests) and
// cpu/tcp_collective.h (processes); NCCL's goes in cuda/ when a multi-GPU machine is lent.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/backend/pending_exchange.h"
#include "deepinfer/base/status.h"

namespace deepinfer {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Queues an all_to_all of `send` and returns at once, so the rank can compute while it is on
  // the wire (two-batch overlap, docs/decisions/0015). A rank's exchanges run one at a time in
  // the order started: every rank must start them in the same order. One dropped unwaited
  // still runs (the others expect it).
  virtual PendingExchange start_all_to_all(std::vector<std::string> send) = 0;
  // send[r] goes to rank r (send.size() == size()); recv[s] is what rank s sent to this one.
  // An error (a rank that never arrives within the group's timeout, or one that aborted) names
  // the rank; the group is unusable afterwards and every later call fails at once, so a rank
  // that dies takes the group down cleanly instead of hanging it.
  Status all_to_all(std::vector<std::string> send, std::vector<std::string>* recv) {
    return start_all_to_all(std::move(send)).wait(recv);
  }
  // Takes the group down: every rank's pending and later calls fail with `why`. Safe to call
  // while this rank's exchanges are in flight (from the thread that started them).
  virtual void abort(const std::string& why) = 0;
};

}  // namespace deepinfer
