#include "deepinfer/server/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <random>

namespace deepinfer::server {
namespace {

constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

void fill_random(uint8_t* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = getrandom(buf + got, len - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      // No getrandom (pre-3.17 kernel or a seccomp filter): the library's CSPRNG device.
      std::random_device rd;
      for (; got < len; ++got) buf[got] = static_cast<uint8_t>(rd());
    }
  }
}

}  // namespace

std::string random_id(std::string_view prefix) {
  std::string id(prefix);
  id.reserve(prefix.size() + kRandomIdChars);
  uint8_t buf[2 * kRandomIdChars];
  while (id.size() < prefix.size() + kRandomIdChars) {
    fill_random(buf, sizeof(buf));
    for (uint8_t b : buf) {
      // 248 = 4 × 62: taking b % 62 only below it keeps every character equally likely.
      if (b >= 248) continue;
      id.push_back(kAlphabet[b % 62]);
      if (id.size() == prefix.size() + kRandomIdChars) break;
    }
  }
  return id;
}

}  // namespace deepinfer::server
