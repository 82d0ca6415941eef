#include "deepinfer/backend/cpu/exchange_queue.h"

namespace deepinfer::cpu {

ExchangeQueue::ExchangeQueue(Exchange exchange)
    : exchange_(std::move(exchange)), thread_([this] { loop(); }) {}

ExchangeQueue::~ExchangeQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
  for (Job& j : jobs_)
    j.slot->finish(failed_precondition("the collective was destroyed before this exchange ran"),
                   {});
}

PendingExchange ExchangeQueue::start(std::vector<std::string> send) {
  auto slot = std::make_shared<ExchangeSlot>();
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back({std::move(send), slot});
  cv_.notify_all();
  return PendingExchange(std::move(slot));
}

bool ExchangeQueue::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.empty() && !running_;
}

void ExchangeQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    std::vector<std::string> recv;
    Status st = exchange_(job.send, &recv);
    job.slot->finish(std::move(st), std::move(recv));
    lock.lock();
    running_ = false;
  }
}

}  // namespace deepinfer::cpu
