#include "deepinfer/disagg/transfer_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "deepinfer/disagg/transfer_channel.h"
#include "deepinfer/disagg/transfer_wire.h"
#include "deepinfer/disagg/ucx_channel.h"

namespace deepinfer::disagg {

using Steady = std::chrono::steady_clock;

StatusOr<std::unique_ptr<TransferServer>> TransferServer::start(
    TransferServerOptions o, std::shared_ptr<HandoffStore> store) {
  if (o.chunk_bytes <= 0 || o.chunk_bytes > (int64_t{1} << 30))
    return invalid_argument("transfer chunk_bytes must be in (0, 1 GiB], got " +
                            std::to_string(o.chunk_bytes));
  if (o.transport != "tcp" && o.transport != "ucx")
    return invalid_argument("--disagg-transport must be tcp or ucx, got '" + o.transport + "'");
  const std::string where = "--disagg-host/--disagg-port " + o.host + ":" + std::to_string(o.port);
  std::unique_ptr<TransferServer> s(new TransferServer(std::move(o), std::move(store)));
  if (s->o_.transport == "ucx") {
    ASSIGN_OR_RETURN(s->ucx_, UcxListener::start(s->o_.host, s->o_.port));
    s->port_ = s->ucx_->port();
  } else {
    ASSIGN_OR_RETURN(auto tcp, net::listen_tcp(s->o_.host, s->o_.port, where));
    s->listen_fd_ = tcp.first.release();
    s->port_ = tcp.second;
  }
  s->acceptor_ = std::thread([raw = s.get()] { raw->accept_loop(); });
  return s;
}

TransferServer::TransferServer(TransferServerOptions o, std::shared_ptr<HandoffStore> store)
    : o_(std::move(o)), store_(std::move(store)) {}

TransferServer::~TransferServer() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  reap(/*all=*/true);  // before the UCX listener goes (connections were accepted from it)
}

void TransferServer::reap(bool all) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!all && !it->ended->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = connections_.erase(it);
  }
}

TransferServerStats TransferServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void TransferServer::spawn(std::function<std::unique_ptr<Channel>()> open) {
  ++active_;
  auto ended = std::make_shared<std::atomic<bool>>(false);
  connections_.push_back({std::thread([this, open = std::move(open), ended] {
                            if (std::unique_ptr<Channel> ch = open()) serve(*ch);
                            --active_;
                            *ended = true;
                          }),
                          ended});
}

void TransferServer::accept_loop() {
  while (!stop_) {
    reap(/*all=*/false);
    if (ucx_) {
      for (UcxPending& p : ucx_->poll(100)) {  // wakes up to notice stop_
        if (active_ >= o_.max_connections) {
          p.reject();
          continue;
        }
        spawn([this, p]() mutable -> std::unique_ptr<Channel> {
          StatusOr<std::unique_ptr<Channel>> ch = p.accept(o_.io_timeout_s);
          if (ch.ok()) return std::move(*ch);
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.failed;
          return nullptr;
        });
      }
      continue;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;  // wakes up to notice stop_
    wire::Fd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0 || active_ >= o_.max_connections) continue;  // over the cap: closed
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto shared = std::make_shared<wire::Fd>(std::move(fd));
    spawn([shared]() -> std::unique_ptr<Channel> {
      return std::make_unique<TcpChannel>(std::move(*shared), "state transfer connection");
    });
  }
}

void TransferServer::serve(Channel& ch) {
  // One request after another on the connection: FETCH, any RESENDs, then DONE.
  std::string id;
  bool done = false;
  // The fetched handoff, held until the connection ends: what it keeps alive (a CUDA IPC
  // buffer the peer maps before DONE) outlives its TTL while the peer is at it.
  std::shared_ptr<const Handoff> fetched;
  while (!done && !stop_) {
    const auto deadline = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                              std::chrono::duration<double>(o_.io_timeout_s));
    char head[8 + 4 + wire::kIdBytes + 4];
    Status st = ch.read(head, sizeof(head), deadline);
    if (st.ok() && std::string_view(head, 8) != wire::kMagic)
      st = invalid_argument("transfer request: bad magic");
    if (!st.ok()) {
      // A peer that leaves after DONE's answer, or between requests, is not a failure.
      std::lock_guard<std::mutex> lock(mu_);
      if (id.empty() || !done) ++stats_.failed;
      return;
    }
    const uint32_t op = wire::get_u32(head + 8);
    const std::string req_id(head + 12, wire::kIdBytes);
    const uint32_t n = wire::get_u32(head + 12 + wire::kIdBytes);
    if (op == wire::kFetch) {
      id = req_id;
      fetched = store_->get(id);
      st = serve_fetch(ch, fetched, &done);
    } else if (op == wire::kResend && req_id == id && n <= wire::kMaxResendIndices) {
      std::string idx(static_cast<size_t>(n) * 4, '\0');
      st = ch.read(idx.data(), idx.size(), deadline);
      std::shared_ptr<const Handoff> h = st.ok() ? store_->get(id) : nullptr;
      if (st.ok() && !h) st = failed_precondition("handoff expired during its transfer");
      for (uint32_t i = 0; st.ok() && i < n; ++i) {
        const uint64_t c = wire::get_u32(idx.data() + 4 * i);
        const uint64_t begin = c * static_cast<uint64_t>(o_.chunk_bytes);
        if (begin >= h->payload.size()) {
          st = invalid_argument("transfer resend: no chunk " + std::to_string(c));
          break;
        }
        const std::string_view bytes =
            std::string_view(h->payload).substr(begin, static_cast<size_t>(o_.chunk_bytes));
        std::string frame;
        wire::put_u32(&frame, static_cast<uint32_t>(c));
        wire::put_u32(&frame, static_cast<uint32_t>(bytes.size()));
        const wire::Digest d = wire::sha256(bytes);
        frame.append(reinterpret_cast<const char*>(d.data()), d.size());
        st = ch.write(frame, deadline);
        if (st.ok()) st = ch.write(bytes, deadline);
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.resent_chunks;
        stats_.bytes_sent += static_cast<int64_t>(bytes.size());
      }
    } else if (op == wire::kDone && req_id == id) {
      store_->erase(id);
      std::string ack;
      wire::put_u32(&ack, 0);
      (void)ch.write(ack, deadline);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.completed;
      return;
    } else {
      st = invalid_argument("transfer request: op " + std::to_string(op) + " out of order");
    }
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.failed;
      return;
    }
  }
}

Status TransferServer::serve_fetch(Channel& ch, const std::shared_ptr<const Handoff>& h,
                                   bool* done) {
  const auto deadline = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                            std::chrono::duration<double>(o_.io_timeout_s));
  std::string head(wire::kMagic);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++(h ? stats_.fetches : stats_.unknown);
  }
  if (!h) {
    wire::put_u32(&head, wire::kUnknownId);
    head.resize(wire::kHeaderBytes, '\0');
    *done = true;  // nothing more to say on this connection
    RETURN_IF_ERROR(ch.write(head, deadline));
    // Wait for the peer to close first: a UCX endpoint closed by force right after a send may
    // drop it (the answer would read as a lost connection, not as an unknown id).
    char byte;
    (void)ch.read(&byte, 1, Steady::now() + std::chrono::seconds(1));
    return ok_status();
  }
  const uint64_t chunk = static_cast<uint64_t>(o_.chunk_bytes);
  const uint64_t chunks = (h->payload.size() + chunk - 1) / chunk;
  wire::put_u32(&head, wire::kOk);
  wire::put_u64(&head, h->meta.size());
  wire::put_u64(&head, h->payload.size());
  wire::put_u32(&head, static_cast<uint32_t>(chunk));
  wire::put_u32(&head, static_cast<uint32_t>(chunks));
  const wire::Digest md = wire::sha256(h->meta);
  head.append(reinterpret_cast<const char*>(md.data()), md.size());
  head += h->meta;
  RETURN_IF_ERROR(ch.write(head, deadline));
  std::string frame;
  for (uint64_t c = 0; c < chunks; ++c) {
    // Every chunk gets its own time limit: a large state on a slow link is not a stall.
    const auto chunk_deadline = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                                    std::chrono::duration<double>(o_.io_timeout_s));
    std::string_view bytes = std::string_view(h->payload).substr(c * chunk, chunk);
    frame.clear();
    wire::put_u32(&frame, static_cast<uint32_t>(c));
    wire::put_u32(&frame, static_cast<uint32_t>(bytes.size()));
    const wire::Digest d = wire::sha256(bytes);
    frame.append(reinterpret_cast<const char*>(d.data()), d.size());
    std::string flipped;
    if (static_cast<int64_t>(c) == o_.corrupt_chunk && !corrupted_.exchange(true)) {
      flipped.assign(bytes);
      flipped[flipped.size() / 2] ^= 0x10;
      bytes = flipped;
    }
    RETURN_IF_ERROR(ch.write(frame, chunk_deadline));
    RETURN_IF_ERROR(ch.write(bytes, chunk_deadline));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_sent += static_cast<int64_t>(bytes.size());
  }
  return ok_status();
}

}  // namespace deepinfer::disagg
