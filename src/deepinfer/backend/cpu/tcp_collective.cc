#include "deepinfer/backend/cpu/tcp_collective.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/exchange_queue.h"
#include "deepinfer/base/socket_io.h"

namespace deepinfer::cpu {
namespace {

constexpr std::string_view kHello = "DIEPCOL1";
constexpr uint32_t kOk = 0, kDown = 1;

class TcpCollective final : public Collective {
 public:
  TcpCollective(TcpGroupOptions o, std::vector<net::Fd> peers)
      : o_(std::move(o)),
        peers_(std::move(peers)),
        queue_([this](const auto& send, auto* recv) { return run(send, recv); }) {}
  // The others would wait for an exchange this rank no longer runs: take the group down.
  ~TcpCollective() override {
    if (!queue_.idle()) abort("its collective was destroyed with an exchange in flight");
  }
  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }

  PendingExchange start_all_to_all(std::vector<std::string> send) override {
    return queue_.start(std::move(send));
  }

  // From the rank's own thread, maybe while the queue's thread is inside an exchange: that one
  // must not see its sockets closed under it (a reused descriptor), so it is only woken (its
  // reads end) and closes them itself on the way out.
  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = "rank " + std::to_string(o_.rank) + " aborted: " + why;
    if (!busy_) return close_locked();
    for (net::Fd& fd : peers_)
      if (fd.get() >= 0) ::shutdown(fd.get(), SHUT_RD);
  }

 private:
  std::string peer(int r) const { return "expert-parallel rank " + std::to_string(r); }

  // Blocking, on the queue's thread.
  Status run(const std::vector<std::string>& send, std::vector<std::string>* recv) {
    if (static_cast<int>(send.size()) != o_.size)
      return invalid_argument("all_to_all: " + std::to_string(send.size()) +
                              " buffers for a group of " + std::to_string(o_.size));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!broken_.empty()) return down_locked();
      busy_ = true;
    }
    Status st = o_.rank == 0 ? route(send, recv) : exchange(send, recv);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    if (!broken_.empty()) return down_locked();  // aborted meanwhile: that is the error
    if (!st.ok()) {
      broken_ = st.message();
      close_locked();
    }
    return st;
  }

  // Rank > 0: its buffers to rank 0, then what the others sent it.
  Status exchange(const std::vector<std::string>& send, std::vector<std::string>* recv) {
    const int fd = peers_[0].get();
    std::string msg;
    for (const std::string& b : send) {
      net::put_u64(&msg, b.size());
      msg += b;
    }
    RETURN_IF_ERROR(net::write_all(fd, msg, net::after(o_.timeout_s), peer(0)));
    char head[4];
    RETURN_IF_ERROR(net::read_exact(fd, head, 4, net::after(o_.timeout_s), peer(0)));
    if (net::get_u32(head) != kOk) {
      std::string why;
      (void)read_buffer(fd, peer(0), &why);
      return failed_precondition("the expert-parallel group is down: " + why);
    }
    return read_buffers(fd, peer(0), recv);
  }

  // Rank 0: every rank's buffers in, each rank's column out.
  Status route(const std::vector<std::string>& send, std::vector<std::string>* recv) {
    std::vector<std::vector<std::string>> from(o_.size);
    from[0] = send;
    for (int r = 1; r < o_.size; ++r)
      RETURN_IF_ERROR(read_buffers(peers_[r].get(), peer(r), &from[r]));
    for (int r = 1; r < o_.size; ++r) {
      std::string msg;
      net::put_u32(&msg, kOk);
      for (int s = 0; s < o_.size; ++s) {
        net::put_u64(&msg, from[s][r].size());
        msg += from[s][r];
      }
      RETURN_IF_ERROR(net::write_all(peers_[r].get(), msg, net::after(o_.timeout_s), peer(r)));
    }
    recv->assign(o_.size, std::string());
    for (int s = 0; s < o_.size; ++s) (*recv)[s] = std::move(from[s][0]);
    return ok_status();
  }

  Status read_buffer(int fd, const std::string& who, std::string* out) {
    char len[8];
    RETURN_IF_ERROR(net::read_exact(fd, len, 8, net::after(o_.timeout_s), who));
    const uint64_t n = net::get_u64(len);
    if (n > (uint64_t{1} << 34)) return failed_precondition(who + ": a malformed frame");
    out->resize(n);
    return net::read_exact(fd, out->data(), n, net::after(o_.timeout_s), who);
  }

  Status read_buffers(int fd, const std::string& who, std::vector<std::string>* out) {
    out->assign(o_.size, std::string());
    for (int s = 0; s < o_.size; ++s) RETURN_IF_ERROR(read_buffer(fd, who, &(*out)[s]));
    return ok_status();
  }

  Status down_locked() {
    close_locked();
    return failed_precondition(broken_);
  }

  // Rank 0 tells the others why before it closes; anyone else just closes, which rank 0 sees.
  void close_locked() {
    if (closed_) return;
    closed_ = true;
    if (o_.rank == 0)
      for (int r = 1; r < o_.size; ++r) {
        std::string msg;
        net::put_u32(&msg, kDown);
        net::put_u64(&msg, broken_.size());
        msg += broken_;
        (void)net::write_all(peers_[r].get(), msg, net::after(1.0), peer(r));
      }
    for (net::Fd& fd : peers_) fd = net::Fd();
  }

  TcpGroupOptions o_;
  std::vector<net::Fd> peers_;  // rank 0: one per rank (index 0 unused); others: [0] = rank 0
  std::mutex mu_;               // broken_, busy_, closed_; abort() comes from another thread
  std::string broken_;          // why the group is down ("" while it is up)
  bool busy_ = false;           // the queue's thread is using peers_
  bool closed_ = false;
  ExchangeQueue queue_;  // last: its thread stops before the rest goes
};

}  // namespace

StatusOr<std::unique_ptr<Collective>> join_tcp_group(const TcpGroupOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return invalid_argument("expert-parallel rank " + std::to_string(o.rank) + " of a group of " +
                            std::to_string(o.size) + ": out of range");
  const std::string where = o.host + ":" + std::to_string(o.port);
  const auto deadline = net::after(o.timeout_s);
  std::vector<net::Fd> peers(o.size);
  if (o.size == 1) return std::unique_ptr<Collective>(new TcpCollective(o, std::move(peers)));
  if (o.rank > 0) {
    StatusOr<net::Fd> fd = failed_precondition("no attempt");
    while (std::chrono::steady_clock::now() < deadline) {
      fd = net::connect_tcp(o.host, o.port, 1.0, "expert-parallel rank 0 at " + where);
      if (fd.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!fd.ok()) return fd.status();
    std::string hello(kHello);
    net::put_u32(&hello, o.rank);
    net::put_u32(&hello, o.size);
    RETURN_IF_ERROR(net::write_all(fd->get(), hello, deadline, "expert-parallel rank 0"));
    char ack[4];
    RETURN_IF_ERROR(net::read_exact(fd->get(), ack, 4, deadline, "expert-parallel rank 0"));
    peers[0] = std::move(*fd);
    return std::unique_ptr<Collective>(new TcpCollective(o, std::move(peers)));
  }
  ASSIGN_OR_RETURN(auto listener,
                   net::listen_tcp(o.host, o.port, "expert-parallel rank 0 " + where));
  int joined = 0;
  while (joined < o.size - 1) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{listener.first.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100))) < 0) break;
    if (!(p.revents & POLLIN)) continue;
    net::Fd fd(::accept4(listener.first.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char hello[16];
    if (fd.get() < 0 ||
        !net::read_exact(fd.get(), hello, 16, net::after(5), "a joining rank").ok() ||
        std::string_view(hello, 8) != kHello)
      continue;  // not one of ours
    const int r = static_cast<int>(net::get_u32(hello + 8));
    if (static_cast<int>(net::get_u32(hello + 12)) != o.size || r < 1 || r >= o.size ||
        peers[r].get() >= 0)
      return failed_precondition("expert-parallel rank 0: a peer joined as rank " +
                                 std::to_string(r) + " of " +
                                 std::to_string(net::get_u32(hello + 12)) +
                                 " (this group: " + std::to_string(o.size) + " ranks)");
    std::string ack;
    net::put_u32(&ack, kOk);
    RETURN_IF_ERROR(
        net::write_all(fd.get(), ack, deadline, "expert-parallel rank " + std::to_string(r)));
    peers[r] = std::move(fd);
    ++joined;
  }
  if (joined < o.size - 1) {
    std::string missing;
    for (int r = 1; r < o.size; ++r)
      if (peers[r].get() < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    return failed_precondition("expert-parallel rank 0 at " + where + ": rank(s) " + missing +
                               " did not join within the timeout");
  }
  return std::unique_ptr<Collective>(new TcpCollective(o, std::move(peers)));
}

}  // namespace deepinfer::cpu
