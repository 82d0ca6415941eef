#include "deepinfer/base/socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace deepinfer::net {

void put_u32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

Deadline after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

namespace {
// Waits until fd is ready for `events` or the deadline passes.
Status wait_ready(int fd, short events, Deadline deadline, const std::string& what) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return failed_precondition(what + ": timed out");
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r > 0) return ok_status();
    if (r < 0 && errno != EINTR)
      return failed_precondition(what + ": poll: " + std::strerror(errno));
  }
}
}  // namespace

Status write_all(int fd, std::string_view bytes, Deadline deadline, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline, what));
      continue;
    }
    return failed_precondition(what + ": send: " + std::strerror(errno));
  }
  return ok_status();
}

Status read_exact(int fd, char* out, size_t n, Deadline deadline, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::recv(fd, out + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return failed_precondition(what + ": the peer closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline, what));
      continue;
    }
    return failed_precondition(what + ": recv: " + std::strerror(errno));
  }
  return ok_status();
}

StatusOr<Fd> connect_tcp(const std::string& host, int port, double timeout_s,
                         const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res))
    return failed_precondition(what + ": " + ::gai_strerror(rc));
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int rc = fd.get() < 0 ? -1 : ::connect(fd.get(), res->ai_addr, res->ai_addrlen);
  int err = errno;
  ::freeaddrinfo(res);
  if (rc != 0 && err == EINPROGRESS) {
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0)
      return failed_precondition(what + ": connect timed out");
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) return failed_precondition(what + ": connect: " + std::strerror(err));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

StatusOr<std::pair<std::string, int>> split_host_port(const std::string& hostport) {
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || colon == 0) return invalid_argument("expected host:port");
  std::string host = hostport.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = hostport.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("the port must be a number");
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) return invalid_argument("the port must be in 1..65535");
  return std::make_pair(std::move(host), p);
}

StatusOr<std::pair<Fd, int>> listen_tcp(const std::string& host, int port,
                                        const std::string& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res))
    return invalid_argument(where + ": " + ::gai_strerror(rc));
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool bound = fd.get() >= 0 && ::bind(fd.get(), res->ai_addr, res->ai_addrlen) == 0 &&
                     ::listen(fd.get(), 128) == 0;
  const int err = errno;
  ::freeaddrinfo(res);
  if (!bound) return failed_precondition(where + ": cannot listen: " + std::strerror(err));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound_port =
      ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return std::make_pair(std::move(fd), bound_port);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace deepinfer::net
