// Tests: a real redis-server on 127.0.0.1 at a free port, without persistence, owned by the test
// process (killed with it). Tests of the cluster index run against it, never against a mock.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::kv {

// A loopback port nothing listens on right now (the kernel's pick; free again once closed).
inline int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

class RedisTestServer {
 public:
  RedisTestServer() : port_(free_loopback_port()) {}
  ~RedisTestServer() {
    stop();
    unlink(log_path().c_str());
  }
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;

  // Starts the server (again, on the same port after stop()) and waits until it answers PING.
  Status start() {
    if (pid_ > 0) return ok_status();
    const std::string binary = find_redis_server();
    if (binary.empty())
      return not_found(
          "redis-server is not installed (not on PATH); the cluster index tests need a real "
          "one: run scripts/install_deps.sh (Debian package redis-server)");
    if (port_ == 0) return internal_error("no free loopback port for redis-server");
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {binary,      "--port",    port,      "--bind",
                                     "127.0.0.1", "--save",    "",        "--appendonly",
                                     "no",        "--logfile", log_path()};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return internal_error("fork for redis-server failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // no server outlives a crashed test
      if (getppid() != parent) _exit(127);
      execv(argv[0], argv.data());
      _exit(127);
    }
    pid_ = pid;
    // A readiness deadline, not a timing assertion: a slow CI box gets ten seconds.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      int wstatus = 0;
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        pid_ = -1;
        return internal_error("redis-server on port " + port + " exited at startup (status " +
                              std::to_string(wstatus) + "); its log: " + log_path());
      }
      if (answers_ping()) return ok_status();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    return internal_error("redis-server on port " + port +
                          " did not answer PING in 10 s; its log: " + log_path());
  }

  // SIGTERM and reap: the server closes its clients' connections and forgets every key.
  void stop() {
    if (pid_ <= 0) return;
    signal_server(SIGCONT);  // a paused server must run to handle SIGTERM
    signal_server(SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // SIGSTOP / SIGCONT: connections stay open but nothing answers, as with a hung server.
  void pause() { signal_server(SIGSTOP); }
  void resume() { signal_server(SIGCONT); }

  int port() const { return port_; }
  // The server's log, kept out of the test output and named in startup errors.
  std::string log_path() const {
    return "/tmp/deepinfer-redis-test-" + std::to_string(port_) + ".log";
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  // Only ever our own child: kill() with a pid <= 0 would signal a whole group.
  void signal_server(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  static std::string find_redis_server() {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
  }

  bool answers_ping() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    timeval timeout{.tv_sec = 1, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    bool pong = false;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
      char buf[16] = {};
      pong = recv(fd, buf, sizeof buf - 1, 0) > 0 && std::string(buf).starts_with("+PONG");
    }
    close(fd);
    return pong;
  }

  int port_;
  pid_t pid_ = -1;
};

}  // namespace deepinfer::kv
