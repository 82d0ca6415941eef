#include "deepinfer/disagg/transfer_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "deepinfer/disagg/transfer_channel.h"
#include "deepinfer/disagg/transfer_wire.h"
#include "deepinfer/disagg/ucx_channel.h"

namespace deepinfer::disagg {

using Steady = std::chrono::steady_clock;

namespace {

std::string request(wire::Op op, const std::string& id, const std::vector<uint32_t>& idx = {}) {
  std::string r(wire::kMagic);
  wire::put_u32(&r, op);
  r += id;
  wire::put_u32(&r, static_cast<uint32_t>(idx.size()));
  for (uint32_t i : idx) wire::put_u32(&r, i);
  return r;
}

// Reads `n` chunk frames into payload, recording which failed their checksum.
Status read_chunks(Channel& ch, uint64_t n, uint64_t chunk, std::string* payload,
                   std::vector<uint32_t>* bad, double io_timeout_s, const std::string& what) {
  const uint64_t chunks = (payload->size() + chunk - 1) / chunk;
  char head[wire::kChunkHeadBytes];
  for (uint64_t k = 0; k < n; ++k) {
    RETURN_IF_ERROR(ch.read(head, sizeof(head), net::after(io_timeout_s)));
    const uint32_t c = wire::get_u32(head);
    const uint32_t len = wire::get_u32(head + 4);
    const uint64_t begin = static_cast<uint64_t>(c) * chunk;
    if (c >= chunks || len != std::min<uint64_t>(chunk, payload->size() - begin))
      return data_loss(what + ": chunk " + std::to_string(c) + " of " + std::to_string(len) +
                       " bytes does not fit the announced state");
    char* dst = payload->data() + begin;
    RETURN_IF_ERROR(ch.read(dst, len, net::after(io_timeout_s)));
    if (wire::sha256(std::string_view(dst, len)) !=
        *reinterpret_cast<const wire::Digest*>(head + 8))
      bad->push_back(c);
  }
  return ok_status();
}

// One connection's worth: FETCH, RESENDs, DONE. `retry` says whether a new connection may help.
StatusOr<Fetched> fetch_once(const HandoffAddress& at, const FetchOptions& o, bool* retry) {
  const std::string what = "state transfer from " + at.host + ":" + std::to_string(at.port) +
                           (at.transport == "ucx" ? " (UCX)" : "");
  *retry = true;
  std::unique_ptr<Channel> ch;
  if (at.transport == "ucx") {
    ASSIGN_OR_RETURN(ch, ucx_connect(at.host, at.port, o.connect_timeout_s, what));
  } else {
    ASSIGN_OR_RETURN(wire::Fd fd, wire::connect_tcp(at.host, at.port, o.connect_timeout_s, what));
    ch = std::make_unique<TcpChannel>(std::move(fd), what);
  }
  RETURN_IF_ERROR(ch->write(request(wire::kFetch, at.id), net::after(o.io_timeout_s)));
  char head[wire::kHeaderBytes];
  RETURN_IF_ERROR(ch->read(head, sizeof(head), net::after(o.io_timeout_s)));
  *retry = false;
  if (std::string_view(head, 8) != wire::kMagic)
    return failed_precondition(what + ": the peer does not speak the transfer protocol");
  if (wire::get_u32(head + 8) == wire::kUnknownId)
    return not_found(what + ": handoff " + at.id + " is unknown or expired there");
  const uint64_t meta_len = wire::get_u64(head + 12);
  const uint64_t payload_len = wire::get_u64(head + 20);
  const uint64_t chunk = wire::get_u32(head + 28);
  const uint64_t chunks = wire::get_u32(head + 32);
  if (meta_len > (uint64_t{64} << 20) || chunk == 0 || chunks != (payload_len + chunk - 1) / chunk)
    return data_loss(what + ": malformed transfer header");
  if (payload_len > static_cast<uint64_t>(o.max_state_bytes))
    return resource_exhausted(what + ": the state is " + std::to_string(payload_len) +
                              " bytes, more than the " + std::to_string(o.max_state_bytes) +
                              " a decode worker takes");
  *retry = true;
  Fetched f;
  f.meta.resize(meta_len);
  RETURN_IF_ERROR(ch->read(f.meta.data(), meta_len, net::after(o.io_timeout_s)));
  if (wire::sha256(f.meta) != *reinterpret_cast<const wire::Digest*>(head + 36))
    return data_loss(what + ": the state's header failed its checksum");
  f.payload.resize(payload_len);
  std::vector<uint32_t> bad;
  RETURN_IF_ERROR(read_chunks(*ch, chunks, chunk, &f.payload, &bad, o.io_timeout_s, what));
  for (int round = 0; !bad.empty(); ++round) {
    f.corrupt_chunks += static_cast<int64_t>(bad.size());
    if (round >= o.resend_rounds)
      return data_loss(what + ": " + std::to_string(bad.size()) + " chunks still fail their " +
                       "checksum after " + std::to_string(o.resend_rounds) + " resends");
    RETURN_IF_ERROR(ch->write(request(wire::kResend, at.id, bad), net::after(o.io_timeout_s)));
    const uint64_t n = bad.size();
    bad.clear();
    RETURN_IF_ERROR(read_chunks(*ch, n, chunk, &f.payload, &bad, o.io_timeout_s, what));
  }
  if (o.before_done) {
    *retry = false;
    RETURN_IF_ERROR(o.before_done(f));
  }
  RETURN_IF_ERROR(ch->write(request(wire::kDone, at.id), net::after(o.io_timeout_s)));
  char ack[4];
  // The state is whole and verified; a lost acknowledgement only leaves it parked until its TTL.
  (void)ch->read(ack, sizeof(ack), net::after(o.io_timeout_s));
  return f;
}

}  // namespace

std::string HandoffAddress::token() const {
  const bool v6 = host.find(':') != std::string::npos;
  return transport + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + id;
}

StatusOr<HandoffAddress> parse_handoff_token(const std::string& token) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("handoff token '" + token.substr(0, 200) + "': " + why);
  };
  HandoffAddress a;
  if (token.rfind("ucx://", 0) == 0) a.transport = "ucx";
  const std::string scheme = a.transport + "://";
  if (token.rfind(scheme, 0) != 0) return bad("must start with tcp:// or ucx://");
  const size_t slash = token.rfind('/');
  if (slash < scheme.size()) return bad("no handoff id");
  a.id = token.substr(slash + 1);
  if (a.id.size() != wire::kIdBytes ||
      a.id.find_first_not_of("0123456789abcdef") != std::string::npos)
    return bad("the handoff id must be 32 lowercase hex digits");
  auto hp = wire::split_host_port(token.substr(scheme.size(), slash - scheme.size()));
  if (!hp.ok()) return bad(hp.status().message());
  a.host = std::move(hp->first);
  a.port = hp->second;
  return a;
}

StatusOr<Fetched> fetch_handoff(const HandoffAddress& at, const FetchOptions& o) {
  const auto t0 = Steady::now();
  Status last = failed_precondition("no attempt made");
  for (int attempt = 1; attempt <= std::max(1, o.attempts); ++attempt) {
    bool retry = false;
    StatusOr<Fetched> f = fetch_once(at, o, &retry);
    if (f.ok()) {
      f->attempts = attempt;
      f->seconds = std::chrono::duration<double>(Steady::now() - t0).count();
      return f;
    }
    last = f.status();
    if (!retry) break;
  }
  return last;
}

}  // namespace deepinfer::disagg
