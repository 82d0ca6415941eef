// An exchange that was started and has not been waited for (Collective::start_all_to_all): the
// rank's communication thread fills it in, wait() hands the result over.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer {

// Shared by the waiter and the thread that runs the exchange.
class ExchangeSlot {
 public:
  void finish(Status status, std::vector<std::string> recv);
  Status wait(std::vector<std::string>* recv);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, taken_ = false;
  Status status_;
  std::vector<std::string> recv_;
};

class PendingExchange {
 public:
  PendingExchange() = default;  // none: wait() fails
  explicit PendingExchange(std::shared_ptr<ExchangeSlot> slot) : slot_(std::move(slot)) {}

  // Blocks until the exchange has run (every run ends: the transports bound each wait and an
  // abort fails them), then gives all_to_all's result. Once only.
  Status wait(std::vector<std::string>* recv);

 private:
  std::shared_ptr<ExchangeSlot> slot_;
};

}  // namespace deepinfer
