#include "deepinfer/base/clock.h"

#include <ctime>

namespace deepinfer {

int64_t SystemClock::now_unix_s() const { return static_cast<int64_t>(std::time(nullptr)); }

const SystemClock& SystemClock::instance() {
  static const SystemClock c;
  return c;
}

}  // namespace deepinfer
