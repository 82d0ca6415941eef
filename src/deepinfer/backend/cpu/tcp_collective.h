// Ranks as processes (or hosts) over TCP, for expert parallelism without NCCL (the CPU tests,
// issue 22): rank 0 listens, the others connect to it. all_to_all runs through rank 0 (each rank
// sends it its buffers, it hands each rank what was sent there): twice the bytes of a mesh, and
// one connection per rank. Every wait is bounded by timeout_s; a rank that dies or goes silent
// fails the calls of every rank with an error naming it, and the group stays down.
#pragma once

#include <memory>
#include <string>

#include "deepinfer/backend/collective.h"
#include "deepinfer/base/status.h"

namespace deepinfer::cpu {

struct TcpGroupOptions {
  std::string host = "127.0.0.1";  // rank 0's address (it binds it; the others connect to it)
  int port = 0;                    // rank 0's port (must be given for a group of several)
  int rank = 0;
  int size = 1;
  double timeout_s = 60;  // rendezvous, and each wait inside a call
};

// Forms the group: rank 0 waits for every other rank to connect and say who it is; the others
// connect (retrying until the timeout: rank 0 may start later). Errors name the ranks missing
// or the address.
StatusOr<std::unique_ptr<Collective>> join_tcp_group(const TcpGroupOptions& o);

}  // namespace deepinfer::cpu
