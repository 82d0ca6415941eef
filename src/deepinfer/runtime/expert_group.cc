#include "deepinfer/runtime/expert_group.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "deepinfer/backend/cpu/tcp_collective.h"
#include "deepinfer/base/socket_io.h"

namespace deepinfer::runtime {

StatusOr<std::unique_ptr<Collective>> join_expert_group(const ExpertGroupOptions& o) {
  if (o.size < 1)
    return invalid_argument("--expert-parallel-size must be >= 1, got " + std::to_string(o.size));
  if (o.rank < 0 || o.rank >= o.size)
    return invalid_argument("--expert-parallel-rank must be in [0, " + std::to_string(o.size) +
                            "), got " + std::to_string(o.rank));
  StatusOr<std::pair<std::string, int>> at = net::split_host_port(o.address);
  if (!at.ok())
    return invalid_argument("--expert-parallel-address '" + o.address +
                            "': " + at.status().message());
  deepinfer::cpu::TcpGroupOptions t;
  t.host = at->first;
  t.port = at->second;
  t.rank = o.rank;
  t.size = o.size;
  t.timeout_s = o.timeout_s;
  return deepinfer::cpu::join_tcp_group(t);
}

StatusOr<int64_t> group_max(Collective& group, int64_t mine) {
  std::string count(8, '\0');
  std::memcpy(count.data(), &mine, 8);
  std::vector<std::string> recv;
  RETURN_IF_ERROR(
      group.all_to_all(std::vector<std::string>(static_cast<size_t>(group.size()), count), &recv));
  int64_t most = mine;
  for (const std::string& r : recv) {
    if (r.size() != 8) return internal_error("expert-parallel group: a malformed count");
    int64_t n = 0;
    std::memcpy(&n, r.data(), 8);
    most = std::max(most, n);
  }
  return most;
}

}  // namespace deepinfer::runtime
