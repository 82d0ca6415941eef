// Wall-clock seconds behind an interface, so retention (days) can be tested with an injected
// clock instead of waiting.
#pragma once

#include <atomic>
#include <cstdint>

namespace deepinfer {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_unix_s() const = 0;
};

// time(nullptr).
class SystemClock final : public Clock {
 public:
  int64_t now_unix_s() const override;
  static const SystemClock& instance();
};

// Tests: a clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_s = 1'800'000'000) : now_(start_s) {}
  int64_t now_unix_s() const override { return now_.load(); }
  void advance(int64_t seconds) { now_ += seconds; }
  void set(int64_t s) { now_ = s; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace deepinfer
