// Blocking socket I/O with deadlines, for the few places that speak raw TCP: the disaggregated
// state transfer (disagg/), worker registration (server/) and the expert-parallel TCP collective
// (backend/cpu/). Little-endian integer codecs for their framing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "deepinfer/base/status.h"

namespace deepinfer::net {

void put_u32(std::string* out, uint32_t v);
void put_u64(std::string* out, uint64_t v);
uint32_t get_u32(const char* p);
uint64_t get_u64(const char* p);

using Deadline = std::chrono::steady_clock::time_point;
// now + seconds.
Deadline after(double seconds);

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

// A listening TCP socket on host:port (0: any free port) and the port it got; errors name
// `where` (the flags that chose the address).
StatusOr<std::pair<Fd, int>> listen_tcp(const std::string& host, int port,
                                        const std::string& where);

}  // namespace deepinfer::net
