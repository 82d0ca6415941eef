// The asynchronous form of the CPU collectives (start_all_to_all / wait): exchanges started
// together arrive in order, and an abort or a destroyed collective fails a pending exchange
// with the group's error instead of leaving it waiting, for ranks as threads and over TCP.
// The groups' timeouts are an hour (kTimeoutS): a call must end on the abort, so a missed
// wake-up hangs, and ctest's per-test limit (120 s, backend/CMakeLists.txt) fails it. No test
// times anything itself (the timeout's error would read like the abort's once the group is
// aborted, so the message cannot tell them apart).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/local_collective.h"
#include "deepinfer/backend/cpu/tcp_collective.h"
#include "deepinfer/base/testing/free_port.h"

namespace deepinfer::cpu {
namespace {

using Group = std::vector<std::unique_ptr<Collective>>;
constexpr double kTimeoutS = 3600;

int free_port() {
  const int port = testing::free_loopback_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  return port;
}

// A TCP group of `size` ranks in this process (each join is on its own thread: rank 0 waits
// for the others).
Group tcp_group(int size) {
  const int port = free_port();
  Group group(size);
  std::vector<std::thread> joins;
  for (int r = 0; r < size; ++r)
    joins.emplace_back([&, r] {
      TcpGroupOptions o;
      o.port = port;
      o.rank = r;
      o.size = size;
      o.timeout_s = kTimeoutS;
      auto g = join_tcp_group(o);
      EXPECT_TRUE(g.ok()) << g.status().to_string();
      if (g.ok()) group[r] = std::move(g).value();
    });
  for (auto& t : joins) t.join();
  return group;
}

Group local_group(int size) { return make_local_group(size, kTimeoutS); }

using MakeGroup = std::function<Group(int)>;

std::string payload(int call, int from, int to) {
  return "call " + std::to_string(call) + " from " + std::to_string(from) + " to " +
         std::to_string(to);
}

void expect_in_order(const MakeGroup& make) {
  constexpr int kSize = 3, kCalls = 4;
  Group group = make(kSize);
  ASSERT_EQ(group.size(), size_t{kSize});
  std::vector<std::thread> ranks;
  for (int r = 0; r < kSize; ++r)
    ranks.emplace_back([&, r] {
      Collective& g = *group[r];
      std::vector<PendingExchange> pending;
      for (int c = 0; c < kCalls; ++c) {
        std::vector<std::string> send;
        for (int to = 0; to < kSize; ++to) send.push_back(payload(c, r, to));
        pending.push_back(g.start_all_to_all(std::move(send)));
      }
      for (int c = kCalls - 1; c >= 0; --c) {  // the last first: it waits for the others
        std::vector<std::string> recv;
        const Status st = pending[c].wait(&recv);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_EQ(recv.size(), size_t{kSize});
        for (int from = 0; from < kSize; ++from) EXPECT_EQ(recv[from], payload(c, from, r));
      }
      std::vector<std::string> recv;
      EXPECT_FALSE(pending[0].wait(&recv).ok()) << "a second wait";
    });
  for (auto& t : ranks) t.join();
}

TEST(AsyncCollective, ExchangesStartedTogetherArriveInOrderLocal) { expect_in_order(local_group); }
TEST(AsyncCollective, ExchangesStartedTogetherArriveInOrderTcp) { expect_in_order(tcp_group); }

// Runs `call`, which must fail (on the abort: the group's timeout is an hour).
Status fails_on_abort(const std::function<Status()>& call) {
  const Status st = call();
  EXPECT_FALSE(st.ok());
  return st;
}

// Rank `pending_rank` starts an exchange the other never joins; rank `aborting` aborts (from
// another thread). The pending wait fails with `want` in its error, and the other rank's calls
// fail too (over TCP possibly one call late: the aborted exchange's bytes may already be on
// the wire to it), none by a timeout.
void expect_abort_fails_pending(const MakeGroup& make, int pending_rank, int aborting,
                                const std::string& want) {
  Group group = make(2);
  ASSERT_EQ(group.size(), 2u);
  PendingExchange p = group[pending_rank]->start_all_to_all({"a", "b"});
  std::thread aborter([&] { group[aborting]->abort("test abort"); });
  std::vector<std::string> recv;
  const Status st = fails_on_abort([&] { return p.wait(&recv); });
  aborter.join();
  EXPECT_NE(st.message().find(want), std::string::npos) << st.to_string();
  Collective& other = *group[1 - pending_rank];
  (void)fails_on_abort([&] {  // its failure is the check
    Status later = other.all_to_all({"", ""}, &recv);
    return later.ok() ? other.all_to_all({"", ""}, &recv) : later;
  });
}

TEST(AsyncCollective, AnAbortFailsAPendingExchangeLocal) {
  expect_abort_fails_pending(local_group, 0, 0, "rank 0 aborted: test abort");
  expect_abort_fails_pending(local_group, 0, 1, "rank 1 aborted: test abort");
  expect_abort_fails_pending(local_group, 1, 1, "rank 1 aborted: test abort");
}

TEST(AsyncCollective, AnAbortFailsAPendingExchangeTcp) {
  expect_abort_fails_pending(tcp_group, 0, 0, "rank 0 aborted: test abort");
  expect_abort_fails_pending(tcp_group, 1, 1, "rank 1 aborted: test abort");
  // Rank 1 closes without a word; rank 0 names it.
  expect_abort_fails_pending(tcp_group, 0, 1, "expert-parallel rank 1");
}

// Over TCP a rank's abort reaches another process's pending exchange through rank 0: rank 1
// waits in an exchange, rank 0 (idle) aborts and tells it why.
TEST(AsyncCollective, RankZerosAbortReachesAnotherRanksPendingExchangeTcp) {
  Group group = tcp_group(2);
  ASSERT_EQ(group.size(), 2u);
  PendingExchange p = group[1]->start_all_to_all({"a", "b"});
  group[0]->abort("test abort");
  std::vector<std::string> recv;
  const Status st = fails_on_abort([&] { return p.wait(&recv); });
  EXPECT_NE(st.message().find("rank 0 aborted: test abort"), std::string::npos) << st.to_string();
}

// A collective destroyed with an exchange in flight takes the group down and joins its thread:
// the dropped exchange and the other rank's next call fail, nothing waits for the timeout.
void expect_destroyed_mid_exchange_fails_cleanly(const MakeGroup& make) {
  Group group = make(2);
  ASSERT_EQ(group.size(), 2u);
  PendingExchange p = group[0]->start_all_to_all({"a", "b"});
  std::vector<std::string> recv;
  const Status st = fails_on_abort([&] {
    group[0].reset();
    return p.wait(&recv);
  });
  EXPECT_NE(st.message().find("destroyed"), std::string::npos) << st.to_string();
  (void)fails_on_abort([&] {  // over TCP possibly one call late, as above
    Status later = group[1]->all_to_all({"", ""}, &recv);
    return later.ok() ? group[1]->all_to_all({"", ""}, &recv) : later;
  });
}

TEST(AsyncCollective, DestroyedMidExchangeFailsCleanlyLocal) {
  expect_destroyed_mid_exchange_fails_cleanly(local_group);
}

TEST(AsyncCollective, DestroyedMidExchangeFailsCleanlyTcp) {
  expect_destroyed_mid_exchange_fails_cleanly(tcp_group);
}

}  // namespace
}  // namespace deepinfer::cpu
