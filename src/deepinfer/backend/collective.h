// A group of ranks that exchange bytes: expert parallelism's dispatch and combine (issue 22).
// Collective: every rank of the group makes the same calls in the same order. Implementations:
// cpu/local_collective.h (ranks as threads of one process, for the CPU tests); NCCL's goes in
// cuda/ when a multi-GPU machine is lent.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // send[r] goes to rank r (send.size() == size()); recv[s] is what rank s sent to this one.
  // An error (a rank that never arrives within the group's timeout, or one that aborted) names
  // the rank; the group is unusable afterwards and every later call fails at once, so a rank
  // that dies takes the group down cleanly instead of hanging it.
  virtual Status all_to_all(const std::vector<std::string>& send,
                            std::vector<std::string>* recv) = 0;
  // Takes the group down: every rank's pending and later calls fail with `why`.
  virtual void abort(const std::string& why) = 0;
};

}  // namespace deepinfer
