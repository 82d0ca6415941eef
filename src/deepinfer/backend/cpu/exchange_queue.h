// One communication thread per rank (Collective::start_all_to_all on the CPU): it runs the
// transport's blocking exchanges in the order they were started, so the rank computes while its
// exchanges are on the wire, and the transports stay the simple blocking code they were.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/backend/pending_exchange.h"
#include "deepinfer/base/status.h"

namespace deepinfer::cpu {

class ExchangeQueue {
 public:
  // The transport's blocking all_to_all, called on the queue's thread only.
  using Exchange =
      std::function<Status(const std::vector<std::string>& send, std::vector<std::string>* recv)>;

  explicit ExchangeQueue(Exchange exchange);
  // Joins the thread after the running exchange ends (an owner with one in flight aborts its
  // group first, so that is prompt); exchanges still queued fail.
  ~ExchangeQueue();
  ExchangeQueue(const ExchangeQueue&) = delete;
  ExchangeQueue& operator=(const ExchangeQueue&) = delete;

  PendingExchange start(std::vector<std::string> send);
  // No exchange queued or running.
  bool idle() const;

 private:
  struct Job {
    std::vector<std::string> send;
    std::shared_ptr<ExchangeSlot> slot;
  };
  void loop();

  Exchange exchange_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool running_ = false, stop_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace deepinfer::cpu
