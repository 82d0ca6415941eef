// The state-transfer wire format (TCP, little-endian) and the socket I/O both ends share.
//
// Request:  "DIKVXFR1" | u32 op | 32-byte handoff id | u32 n | n x u32 chunk index
//   op 1 FETCH (n = 0): the header, the meta and every chunk;
//   op 2 RESEND: the listed chunks again (after a checksum failure);
//   op 3 DONE (n = 0): the decode worker has the state; the prefill worker forgets it.
// FETCH answer: "DIKVXFR1" | u32 status (0 ok, 1 unknown or expired id) | u64 meta bytes |
//   u64 payload bytes | u32 chunk bytes | u32 chunks | SHA-256 of the meta | the meta.
// A chunk: u32 index | u32 bytes | SHA-256 of its bytes | its bytes.
// DONE answer: u32 0.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "deepinfer/base/status.h"

namespace deepinfer::disagg::wire {

inline constexpr std::string_view kMagic = "DIKVXFR1";
inline constexpr size_t kIdBytes = 32;
enum Op : uint32_t { kFetch = 1, kResend = 2, kDone = 3 };
enum Answer : uint32_t { kOk = 0, kUnknownId = 1 };
inline constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8 + 4 + 4 + 32;
inline constexpr size_t kChunkHeadBytes = 4 + 4 + 32;
inline constexpr uint32_t kMaxResendIndices = 1 << 20;

using Digest = std::array<uint8_t, 32>;
Digest sha256(std::string_view bytes);

void put_u32(std::string* out, uint32_t v);
void put_u64(std::string* out, uint64_t v);
uint32_t get_u32(const char* p);
uint64_t get_u64(const char* p);

using Deadline = std::chrono::steady_clock::time_point;

// Whole buffers, each wait bounded by `deadline`. Errors (failed_precondition) name `what`
// (e.g. the peer's address) and the cause: a timeout, the peer closing or resetting.
Status write_all(int fd, std::string_view bytes, Deadline deadline, const std::string& what);
Status read_exact(int fd, char* out, size_t n, Deadline deadline, const std::string& what);

// Owns a socket descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

// "host:port" or "[v6]:port" into the host (brackets dropped) and a port in 1..65535; the error
// (invalid_argument) says what is wrong, for the caller to prefix with what it parsed.
StatusOr<std::pair<std::string, int>> split_host_port(const std::string& hostport);

// A non-blocking TCP connection (TCP_NODELAY) to host:port within timeout_s; errors
// (failed_precondition) name `what` and the cause.
StatusOr<Fd> connect_tcp(const std::string& host, int port, double timeout_s,
                         const std::string& what);

}  // namespace deepinfer::disagg::wire
