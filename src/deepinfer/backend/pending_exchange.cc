#include "deepinfer/backend/pending_exchange.h"

namespace deepinfer {

void ExchangeSlot::finish(Status status, std::vector<std::string> recv) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(status);
  recv_ = std::move(recv);
  done_ = true;
  cv_.notify_all();
}

Status ExchangeSlot::wait(std::vector<std::string>* recv) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (taken_) return internal_error("an exchange was waited for twice");
  taken_ = true;
  if (status_.ok()) *recv = std::move(recv_);
  return status_;
}

Status PendingExchange::wait(std::vector<std::string>* recv) {
  if (!slot_) return internal_error("waited for an exchange that was never started");
  return slot_->wait(recv);
}

}  // namespace deepinfer
