#include "deepinfer/disagg/ucx_channel.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

namespace deepinfer::disagg {
namespace {

using Steady = std::chrono::steady_clock;

std::string ucs_error(ucs_status_t s) { return ucs_status_string(s); }

// One UCP context for the process, made on first use. Workers are created and progressed by
// different threads (each its own), hence mt_workers_shared.
StatusOr<ucp_context_h> context() {
  static std::mutex mu;
  static ucp_context_h ctx = nullptr;
  static ucs_status_t failed = UCS_OK;
  std::lock_guard<std::mutex> lock(mu);
  if (ctx == nullptr && failed == UCS_OK) {
    ucp_config_t* config = nullptr;
    failed = ucp_config_read(nullptr, nullptr, &config);
    if (failed == UCS_OK) {
      ucp_params_t p{};
      p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
      p.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
      p.mt_workers_shared = 1;
      failed = ucp_init(&p, config, &ctx);
      ucp_config_release(config);
    }
  }
  if (ctx == nullptr) return failed_precondition("UCX: cannot initialize: " + ucs_error(failed));
  return ctx;
}

struct Worker {
  ucp_worker_h w = nullptr;
  int efd = -1;
  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    if (w) ucp_worker_destroy(w);
  }
};

StatusOr<std::unique_ptr<Worker>> make_worker(const std::string& what) {
  ASSIGN_OR_RETURN(ucp_context_h ctx, context());
  auto worker = std::make_unique<Worker>();
  ucp_worker_params_t p{};
  p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  p.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(ctx, &p, &worker->w);
  if (st == UCS_OK) st = ucp_worker_get_efd(worker->w, &worker->efd);
  if (st != UCS_OK) return failed_precondition(what + ": UCX worker: " + ucs_error(st));
  return worker;
}

// Progresses what is pending, then sleeps on the worker's event fd until activity, for at most
// 100 ms and never past the deadline. false once the deadline has passed.
bool wait(Worker& w, wire::Deadline deadline) {
  while (ucp_worker_progress(w.w) != 0) {
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count();
  if (left <= 0) return false;
  if (ucp_worker_arm(w.w) == UCS_ERR_BUSY) return true;  // events came in meanwhile
  pollfd p{w.efd, POLLIN, 0};
  (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  return true;
}

StatusOr<sockaddr_storage> resolve(const std::string& host, int port, bool passive, socklen_t* len,
                                   const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                             &hints, &res))
    return failed_precondition(what + ": " + ::gai_strerror(rc));
  sockaddr_storage sa{};
  std::memcpy(&sa, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return sa;
}

class UcxChannel final : public Channel {
 public:
  UcxChannel(std::unique_ptr<Worker> worker, std::string peer)
      : Channel(std::move(peer)), worker_(std::move(worker)) {}

  // Creates the endpoint; `p` holds the address or the connection request.
  Status open(ucp_ep_params_t p) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &UcxChannel::on_error;
    p.err_handler.arg = this;
    const ucs_status_t st = ucp_ep_create(worker_->w, &p, &ep_);
    if (st != UCS_OK) {
      ep_ = nullptr;
      return failed_precondition(peer_ + ": UCX endpoint: " + ucs_error(st));
    }
    return ok_status();
  }

  ~UcxChannel() override {
    if (ep_ == nullptr) return;
    // By force: every byte that matters was answered by the peer before either side closes
    // (chunks by RESEND or DONE, DONE by its ack, whose loss only leaves the state to expire),
    // and a flushing close waits on a peer that may be gone.
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep_, &p);
    if (UCS_PTR_IS_PTR(req)) {
      const auto deadline = net::after(1.0);
      while (ucp_request_check_status(req) == UCS_INPROGRESS && wait(*worker_, deadline)) {
      }
      ucp_request_free(req);
    }
  }

  Status write(std::string_view bytes, wire::Deadline deadline) override {
    if (bytes.empty()) return ok_status();
    RETURN_IF_ERROR(check_peer());
    ucp_request_param_t p{};
    return complete(ucp_stream_send_nbx(ep_, bytes.data(), bytes.size(), &p), deadline, "send",
                    false);
  }

  Status read(char* out, size_t n, wire::Deadline deadline) override {
    if (n == 0) return ok_status();
    RETURN_IF_ERROR(check_peer());
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    size_t len = 0;
    return complete(ucp_stream_recv_nbx(ep_, out, n, &len, &p), deadline, "recv", true);
  }

 private:
  static void on_error(void* arg, ucp_ep_h, ucs_status_t st) {
    auto* c = static_cast<UcxChannel*>(arg);
    c->failed_ = true;
    c->fail_status_ = st;
  }

  Status check_peer() const {
    if (!failed_) return ok_status();
    return failed_precondition(peer_ + ": the peer closed the connection (" +
                               ucs_error(fail_status_) + ")");
  }

  // Waits for a send or receive to finish, the peer to fail, or the deadline.
  Status complete(ucs_status_ptr_t req, wire::Deadline deadline, const char* op, bool recv) {
    if (req == nullptr) return ok_status();
    if (UCS_PTR_IS_ERR(req))
      return failed_precondition(peer_ + ": " + op + ": " + ucs_error(UCS_PTR_STATUS(req)));
    while (true) {
      size_t len = 0;
      const ucs_status_t st =
          recv ? ucp_stream_recv_request_test(req, &len) : ucp_request_check_status(req);
      if (st != UCS_INPROGRESS) {
        ucp_request_free(req);
        if (st == UCS_OK) return ok_status();
        failed_ = true;
        fail_status_ = st;
        return check_peer();
      }
      if (!wait(*worker_, deadline)) {
        ucp_request_cancel(worker_->w, req);
        const auto grace = net::after(1.0);
        while (ucp_request_check_status(req) == UCS_INPROGRESS && wait(*worker_, grace)) {
        }
        ucp_request_free(req);
        failed_ = true;
        fail_status_ = UCS_ERR_TIMED_OUT;
        return failed_precondition(peer_ + ": timed out");
      }
    }
  }

  std::unique_ptr<Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  ucs_status_t fail_status_ = UCS_OK;
};

}  // namespace

StatusOr<std::unique_ptr<Channel>> ucx_connect(const std::string& host, int port, double timeout_s,
                                               const std::string& peer) {
  (void)timeout_s;  // connection setup is bounded by the first read's or write's deadline
  socklen_t len = 0;
  ASSIGN_OR_RETURN(sockaddr_storage sa, resolve(host, port, false, &len, peer));
  ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, make_worker(peer));
  auto channel = std::make_unique<UcxChannel>(std::move(worker), peer);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  p.sockaddr.addrlen = len;
  RETURN_IF_ERROR(channel->open(p));
  return std::unique_ptr<Channel>(std::move(channel));
}

StatusOr<std::unique_ptr<Channel>> UcxPending::accept(double timeout_s) {
  (void)timeout_s;
  const std::string peer = "UCX state transfer connection";
  ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, make_worker(peer));
  auto channel = std::make_unique<UcxChannel>(std::move(worker), peer);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  p.conn_request = static_cast<ucp_conn_request_h>(request_);
  RETURN_IF_ERROR(channel->open(p));
  return std::unique_ptr<Channel>(std::move(channel));
}

void UcxPending::reject() {
  (void)ucp_listener_reject(static_cast<ucp_listener_h>(listener_),
                            static_cast<ucp_conn_request_h>(request_));
}

struct UcxListener::Impl {
  std::unique_ptr<Worker> worker;
  ucp_listener_h listener = nullptr;
  std::vector<ucp_conn_request_h> requests;
  static void on_request(ucp_conn_request_h r, void* arg) {
    static_cast<Impl*>(arg)->requests.push_back(r);
  }
  ~Impl() {
    for (ucp_conn_request_h r : requests) (void)ucp_listener_reject(listener, r);
    if (listener) ucp_listener_destroy(listener);
  }
};

StatusOr<std::unique_ptr<UcxListener>> UcxListener::start(const std::string& host, int port) {
  const std::string where =
      "--disagg-host/--disagg-port " + host + ":" + std::to_string(port) + " (UCX)";
  socklen_t len = 0;
  ASSIGN_OR_RETURN(sockaddr_storage sa, resolve(host, port, true, &len, where));
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->worker, make_worker(where));
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  lp.sockaddr.addrlen = len;
  lp.conn_handler.cb = &Impl::on_request;
  lp.conn_handler.arg = impl.get();
  ucs_status_t st = ucp_listener_create(impl->worker->w, &lp, &impl->listener);
  if (st != UCS_OK) {
    impl->listener = nullptr;
    return failed_precondition(where + ": cannot listen: " + ucs_error(st));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  st = ucp_listener_query(impl->listener, &attr);
  if (st != UCS_OK) return failed_precondition(where + ": " + ucs_error(st));
  const int bound = ntohs(attr.sockaddr.ss_family == AF_INET6
                              ? reinterpret_cast<const sockaddr_in6*>(&attr.sockaddr)->sin6_port
                              : reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  return std::unique_ptr<UcxListener>(new UcxListener(std::move(impl), bound));
}

UcxListener::UcxListener(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

UcxListener::~UcxListener() = default;

std::vector<UcxPending> UcxListener::poll(int timeout_ms) {
  (void)wait(*impl_->worker, net::after(timeout_ms / 1000.0));
  while (ucp_worker_progress(impl_->worker->w) != 0) {
  }
  std::vector<UcxPending> out;
  for (ucp_conn_request_h r : impl_->requests) out.emplace_back(impl_->listener, r);
  impl_->requests.clear();
  return out;
}

}  // namespace deepinfer::disagg
