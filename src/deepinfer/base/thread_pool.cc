#include "deepinfer/base/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace deepinfer {
namespace {
// Set while a thread runs pool work: nested parallel_for calls then run inline instead of
// re-entering the (single-job) pool.
thread_local bool t_in_pool = false;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (!job_) continue;
    ++active_;
    t_in_pool = true;
    while (next_ < job_n_) {
      int64_t b = next_;
      int64_t e = std::min(job_n_, b + job_chunk_);
      next_ = e;
      lock.unlock();
      (*job_)(b, e);
      lock.lock();
    }
    t_in_pool = false;
    if (--active_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunk = std::max<int64_t>(min_chunk, (n + 4 * num_threads() - 1) / (4 * num_threads()));
  if (workers_.empty() || n <= chunk || t_in_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> one_job(call_mu_);  // callers from several threads take turns
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_ = 0;
  ++generation_;
  ++active_;
  t_in_pool = true;
  cv_.notify_all();
  while (next_ < job_n_) {
    int64_t b = next_;
    int64_t e = std::min(job_n_, b + job_chunk_);
    next_ = e;
    lock.unlock();
    fn(b, e);
    lock.lock();
  }
  t_in_pool = false;
  if (--active_ > 0) done_cv_.wait(lock, [&] { return active_ == 0; });
  job_ = nullptr;
}

ThreadPool& ThreadPool::default_pool() {
  static ThreadPool pool([] {
    if (const char* env = std::getenv("DEEPINFER_NUM_THREADS")) {
      int n = std::atoi(env);
      if (n > 0) return n;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }());
  return pool;
}

}  // namespace deepinfer
