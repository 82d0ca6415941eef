// A decode worker's side of the state transfer: fetches one handoff from the prefill worker
// that parked it, verifying every chunk's SHA-256; corrupt chunks are fetched again (bounded
// rounds), a lost connection or a timeout is retried from the start (bounded attempts), and
// anything else is an error: a caller never gets partial or unverified state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::disagg {

// tcp://host:port/<32 hex digits> (or ucx://...): where a handoff waits and how to reach it.
// Handed from the prefill worker to the decode worker (through the router) as an opaque token.
struct HandoffAddress {
  std::string host;
  int port = 0;
  std::string id;
  std::string transport = "tcp";  // tcp | ucx
  std::string token() const;
};
// invalid_argument naming the token when it is malformed.
StatusOr<HandoffAddress> parse_handoff_token(const std::string& token);

struct Fetched {
  std::string meta, payload;
  int64_t corrupt_chunks = 0;  // detected and fetched again
  int attempts = 0;
  double seconds = 0;
};

struct FetchOptions {
  double connect_timeout_s = 5;
  double io_timeout_s = 10;  // each wait for the peer
  int attempts = 2;          // connections tried (a dropped connection starts over)
  int resend_rounds = 3;     // re-fetches of corrupt chunks per attempt
  // A peer announcing a larger state is refused before anything is allocated (a corrupt or
  // hostile header must not take the decode worker's memory).
  int64_t max_state_bytes = int64_t{16} << 30;
  // Runs on the verified state before DONE, while the prefill worker still holds it (a CUDA IPC
  // state is mapped here); its error is the fetch's, with no retry and no DONE (the state
  // stays parked until its TTL).
  std::function<Status(Fetched&)> before_done;
};

// failed_precondition naming the address for an unreachable peer, a timeout or a connection
// lost on every attempt; not_found when the handoff is unknown or expired there; data_loss
// when chunks stay corrupt or the header is malformed; resource_exhausted for a state over
// max_state_bytes.
StatusOr<Fetched> fetch_handoff(const HandoffAddress& at, const FetchOptions& o = {});

}  // namespace deepinfer::disagg
