#include "deepinfer/backend/cpu/local_collective.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "deepinfer/backend/cpu/exchange_queue.h"

namespace deepinfer::cpu {
namespace {

struct Shared {
  explicit Shared(int n, double t)
      : size(n), timeout_s(t), slots(n, std::vector<std::string>(n)), arrived(n, false) {}
  const int size;
  const double timeout_s;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::string>> slots;  // [from][to]
  std::vector<bool> arrived;                    // this round
  int deposited = 0, collected = 0;
  bool collecting = false;  // every rank has deposited; they now take their buffers
  std::string broken;       // why the group is down ("" while it is up)
};

class LocalCollective final : public Collective {
 public:
  LocalCollective(std::shared_ptr<Shared> s, int rank)
      : s_(std::move(s)),
        rank_(rank),
        queue_([this](const auto& send, auto* recv) { return exchange(send, recv); }) {}
  // The others would wait for an exchange this rank no longer runs: break the group instead.
  ~LocalCollective() override {
    if (!queue_.idle()) abort("its collective was destroyed with an exchange in flight");
  }
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }

  PendingExchange start_all_to_all(std::vector<std::string> send) override {
    return queue_.start(std::move(send));
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->broken.empty()) s_->broken = "rank " + std::to_string(rank_) + " aborted: " + why;
    s_->cv.notify_all();
  }

 private:
  // Blocking, on the queue's thread.
  Status exchange(const std::vector<std::string>& send, std::vector<std::string>* recv) {
    Shared& s = *s_;
    if (static_cast<int>(send.size()) != s.size)
      return invalid_argument("all_to_all: " + std::to_string(send.size()) +
                              " buffers for a group of " + std::to_string(s.size));
    std::unique_lock<std::mutex> lock(s.mu);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(s.timeout_s));
    // The previous round must be fully collected before this one deposits.
    if (!s.cv.wait_until(lock, deadline, [&] { return !s.broken.empty() || !s.collecting; }))
      return fail_locked("the previous exchange did not finish");
    if (!s.broken.empty()) return failed_precondition(s.broken);
    for (int r = 0; r < s.size; ++r) s.slots[rank_][r] = send[r];
    s.arrived[rank_] = true;
    if (++s.deposited == s.size) {
      s.collecting = true;
      s.cv.notify_all();
    }
    if (!s.cv.wait_until(lock, deadline, [&] { return !s.broken.empty() || s.collecting; }))
      return fail_locked(missing_locked());
    if (!s.broken.empty()) return failed_precondition(s.broken);
    recv->assign(s.size, std::string());
    for (int r = 0; r < s.size; ++r) (*recv)[r] = std::move(s.slots[r][rank_]);
    if (++s.collected == s.size) {
      s.deposited = s.collected = 0;
      s.collecting = false;
      s.arrived.assign(s.size, false);
      s.cv.notify_all();
    }
    return ok_status();
  }

  std::string missing_locked() const {
    std::string who;
    for (int r = 0; r < s_->size; ++r)
      if (!s_->arrived[r]) who += (who.empty() ? "" : ", ") + std::to_string(r);
    return "rank(s) " + who + " did not arrive";
  }

  Status fail_locked(const std::string& what) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", s_->timeout_s);
    if (s_->broken.empty())
      s_->broken = "expert-parallel group: " + what + " within " + secs + " s (seen by rank " +
                   std::to_string(rank_) + ")";
    s_->cv.notify_all();
    return failed_precondition(s_->broken);
  }

  std::shared_ptr<Shared> s_;
  int rank_;
  ExchangeQueue queue_;  // last: its thread stops before the rest goes
};

}  // namespace

std::vector<std::unique_ptr<Collective>> make_local_group(int size, double timeout_s) {
  auto shared = std::make_shared<Shared>(size, timeout_s);
  std::vector<std::unique_ptr<Collective>> group;
  for (int r = 0; r < size; ++r) group.push_back(std::make_unique<LocalCollective>(shared, r));
  return group;
}

}  // namespace deepinfer::cpu
