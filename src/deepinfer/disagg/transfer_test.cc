// disagg/: the handoff store (TTL on an injected clock, the byte cap) and the TCP state transfer
// over loopback: whole states arrive byte for byte; a corrupted chunk is detected and fetched
// again; unknown ids, closed ports, a silent peer and a peer that drops mid-state are errors,
// never partial state.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "deepinfer/disagg/handoff_store.h"
#include "deepinfer/disagg/transfer_client.h"
#include "deepinfer/disagg/transfer_server.h"
#include "deepinfer/disagg/transfer_wire.h"

namespace deepinfer::disagg {
namespace {

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(HandoffStore, KeepsAStateUntilTakenOrExpired) {
  ManualClock clock;
  HandoffStore store({.capacity_bytes = 1000, .ttl_s = 60, .clock = &clock});
  auto a = store.put("{}", std::string(100, 'a'));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 32u);
  ASSERT_NE(store.get(*a), nullptr);
  EXPECT_EQ(store.get(*a)->payload, std::string(100, 'a'));
  EXPECT_EQ(store.stats().bytes, 102);
  store.erase(*a);
  EXPECT_EQ(store.get(*a), nullptr);
  EXPECT_EQ(store.stats().taken, 1);

  auto b = store.put("{}", "b");
  ASSERT_TRUE(b.ok());
  clock.advance(59);
  EXPECT_NE(store.get(*b), nullptr);
  clock.advance(1);
  EXPECT_EQ(store.get(*b), nullptr);  // a state nobody fetched in time is gone
  store.sweep();
  EXPECT_EQ(store.stats().expired, 1);
  EXPECT_EQ(store.stats().bytes, 0);
}

TEST(HandoffStore, RefusesWhatDoesNotFitAfterDroppingExpiredStates) {
  ManualClock clock;
  HandoffStore store({.capacity_bytes = 100, .ttl_s = 10, .clock = &clock});
  ASSERT_TRUE(store.put("", std::string(80, 'x')).ok());
  auto full = store.put("", std::string(30, 'y'));
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("--disagg-handoff-bytes"), std::string::npos);
  EXPECT_EQ(store.stats().refused_full, 1);
  clock.advance(10);
  EXPECT_TRUE(store.put("", std::string(30, 'y')).ok());  // the expired one made room
}

TEST(HandoffToken, RoundTripsAndNamesWhatIsWrong) {
  HandoffAddress a{"127.0.0.1", 4567, std::string(32, 'f')};
  auto back = parse_handoff_token(a.token());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->host, "127.0.0.1");
  EXPECT_EQ(back->port, 4567);
  EXPECT_EQ(back->id, a.id);
  auto v6 = parse_handoff_token(HandoffAddress{"::1", 80, a.id}.token());
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  auto ucx = parse_handoff_token("ucx://10.0.0.2:99/" + a.id);
  ASSERT_TRUE(ucx.ok());
  EXPECT_EQ(ucx->transport, "ucx");
  EXPECT_EQ(ucx->host, "10.0.0.2");
  for (const std::string& bad :
       std::vector<std::string>{"http://h:1/" + a.id, "tcp://h:1/abc", "tcp://h/" + a.id,
                                "tcp://h:99999/" + a.id, "tcp://h:1/" + std::string(32, 'G')}) {
    auto r = parse_handoff_token(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("handoff token"), std::string::npos);
  }
}

// A loopback port nobody listens on: bound, noted, closed.
int closed_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Loopback {
  std::shared_ptr<HandoffStore> store = std::make_shared<HandoffStore>(HandoffStoreOptions{});
  std::unique_ptr<TransferServer> server;
  std::string transport;
  explicit Loopback(TransferServerOptions o = {}) : transport(o.transport) {
    o.chunk_bytes = 1 << 20;
    auto s = TransferServer::start(o, store);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(*s);
  }
  HandoffAddress park(std::string meta, std::string payload) {
    auto id = store->put(std::move(meta), std::move(payload));
    EXPECT_TRUE(id.ok());
    return {"127.0.0.1", server->port(), id.ok() ? *id : "", transport};
  }
};

// The same protocol over UCX (Debian's libucx; on loopback it picks shared memory or TCP).
TEST(TransferUcx, StatesArriveWholeCorruptChunksAreRefetchedUnknownIdsAreNotFound) {
  TransferServerOptions o;
  o.transport = "ucx";
  o.corrupt_chunk = 2;
  Loopback lb(o);
  ASSERT_TRUE(lb.server);
  const std::string payload = random_bytes((6 << 20) + 777, 3);
  const HandoffAddress at = lb.park("{\"ucx\": true}", payload);
  EXPECT_EQ(at.token().rfind("ucx://127.0.0.1:", 0), 0u) << at.token();
  auto f = fetch_handoff(at);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->meta, "{\"ucx\": true}");
  EXPECT_TRUE(f->payload == payload);
  EXPECT_EQ(f->corrupt_chunks, 1);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  std::vector<std::string> payloads;
  std::vector<HandoffAddress> many;
  for (int i = 0; i < 8; ++i) {
    payloads.push_back(random_bytes(200000 + 313 * i, 40 + i));
    many.push_back(lb.park(std::to_string(i), payloads.back()));
  }
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto g = fetch_handoff(many[i]);
      ok[i] = g.ok() && g->meta == std::to_string(i) && g->payload == payloads[i];
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ok[i]) << "UCX fetch " << i;
  auto unknown = fetch_handoff({"127.0.0.1", lb.server->port(), std::string(32, '0'), "ucx"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound) << unknown.status().to_string();
}

TEST(TransferUcx, NobodyListeningIsAnErrorWithinTheTimeout) {
  const int closed_port = closed_loopback_port();
  FetchOptions quick;
  quick.io_timeout_s = 2;
  auto f = fetch_handoff({"127.0.0.1", closed_port, std::string(32, '0'), "ucx"}, quick);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("UCX"), std::string::npos) << f.status().to_string();
}

TEST(Transfer, AWholeStateArrivesByteForByteAndIsForgottenThere) {
  Loopback lb;
  ASSERT_TRUE(lb.server);
  const std::string payload = random_bytes((10 << 20) + 12345, 1);  // 11 chunks, a short last
  const HandoffAddress at = lb.park("{\"meta\": 1}", payload);
  auto f = fetch_handoff(at);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->meta, "{\"meta\": 1}");
  EXPECT_TRUE(f->payload == payload);
  EXPECT_EQ(f->corrupt_chunks, 0);
  for (int i = 0; i < 200 && lb.store->stats().handoffs != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // DONE reaches the server
  EXPECT_EQ(lb.store->stats().taken, 1);
  auto again = fetch_handoff(at);  // fetched once: gone
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
}

// before_done runs on the whole state while the prefill side still holds it (what a CUDA IPC
// state's mapping needs): its error fails the fetch without DONE, so the state stays parked and
// whatever it keeps alive is still alive; on success DONE follows and the state is forgotten.
TEST(Transfer, BeforeDoneRunsWhileTheStateIsHeldAndItsErrorKeepsItParked) {
  Loopback lb;
  ASSERT_TRUE(lb.server);
  auto kept = std::make_shared<int>(7);
  std::weak_ptr<int> watch = kept;
  auto id = lb.store->put("{\"ipc\": 1}", "", std::move(kept));
  ASSERT_TRUE(id.ok());
  const HandoffAddress at{"127.0.0.1", lb.server->port(), *id, "tcp"};
  FetchOptions o;
  int calls = 0;
  o.before_done = [&](Fetched& f) {
    ++calls;
    EXPECT_EQ(f.meta, "{\"ipc\": 1}");
    EXPECT_FALSE(watch.expired());  // what the handoff keeps is alive during the call
    return failed_precondition("cannot map it");
  };
  auto failed = fetch_handoff(at, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "cannot map it");
  EXPECT_EQ(calls, 1);                       // not retried
  EXPECT_EQ(lb.store->stats().handoffs, 1);  // no DONE: still parked
  EXPECT_FALSE(watch.expired());
  o.before_done = [&](Fetched&) {
    ++calls;
    return ok_status();
  };
  auto f = fetch_handoff(at, o);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(calls, 2);
  for (int i = 0; i < 200 && !watch.expired(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // DONE, then the connection ends
  EXPECT_EQ(lb.store->stats().taken, 1);
  EXPECT_TRUE(watch.expired());
}

TEST(Transfer, EmptyStateAndManyConcurrentFetches) {
  Loopback lb;
  ASSERT_TRUE(lb.server);
  auto empty = fetch_handoff(lb.park("m", ""));
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(empty->payload, "");
  std::vector<std::string> payloads;
  std::vector<HandoffAddress> at;
  for (int i = 0; i < 16; ++i) {
    payloads.push_back(random_bytes(300000 + 7919 * i, 10 + i));
    at.push_back(lb.park(std::to_string(i), payloads.back()));
  }
  std::vector<std::thread> threads;
  std::vector<int> ok(16, 0);
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      auto f = fetch_handoff(at[i]);
      ok[i] = f.ok() && f->meta == std::to_string(i) && f->payload == payloads[i];
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(ok[i]) << "fetch " << i;
}

TEST(Transfer, ACorruptedChunkIsDetectedAndFetchedAgain) {
  TransferServerOptions o;
  o.corrupt_chunk = 3;
  Loopback lb(o);
  ASSERT_TRUE(lb.server);
  const std::string payload = random_bytes(5 << 20, 2);
  auto f = fetch_handoff(lb.park("m", payload));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->corrupt_chunks, 1);
  EXPECT_TRUE(f->payload == payload);
  EXPECT_EQ(lb.server->stats().resent_chunks, 1);
}

TEST(Transfer, UnknownIdClosedPortAndSilentPeerAreErrorsNamingTheAddress) {
  Loopback lb;
  ASSERT_TRUE(lb.server);
  auto unknown = fetch_handoff({"127.0.0.1", lb.server->port(), std::string(32, '0')});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);

  const int closed_port = closed_loopback_port();
  auto refused = fetch_handoff({"127.0.0.1", closed_port, std::string(32, '0')});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("127.0.0.1:" + std::to_string(closed_port)),
            std::string::npos)
      << refused.status().to_string();

  // A peer that accepts and never answers: each attempt ends at the I/O timeout.
  int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(silent, 4), 0);
  len = sizeof(addr);
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
  FetchOptions quick;
  quick.io_timeout_s = 0.3;
  auto hung = fetch_handoff({"127.0.0.1", ntohs(addr.sin_port), std::string(32, '0')}, quick);
  ASSERT_FALSE(hung.ok());
  EXPECT_NE(hung.status().message().find("timed out"), std::string::npos)
      << hung.status().to_string();
  ::close(silent);
}

// A peer that announces a state and drops the connection halfway: no partial state comes back.
TEST(Transfer, APeerDroppingMidStateGivesAnErrorNotPartialState) {
  int srv = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(srv, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread peer([srv] {
    for (int attempt = 0; attempt < 2; ++attempt) {  // the client tries twice
      int c = ::accept(srv, nullptr, nullptr);
      char req[8 + 4 + 32 + 4];
      (void)wire::read_exact(c, req, sizeof(req),
                             std::chrono::steady_clock::now() + std::chrono::seconds(5),
                             "test peer");
      std::string head(wire::kMagic);
      wire::put_u32(&head, wire::kOk);
      wire::put_u64(&head, 1);
      wire::put_u64(&head, 2 << 20);
      wire::put_u32(&head, 1 << 20);
      wire::put_u32(&head, 2);
      const wire::Digest d = wire::sha256("m");
      head.append(reinterpret_cast<const char*>(d.data()), d.size());
      head += "m";
      (void)wire::write_all(c, head, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                            "test peer");
      ::close(c);  // before any chunk
    }
  });
  auto f = fetch_handoff({"127.0.0.1", ntohs(addr.sin_port), std::string(32, '0')});
  peer.join();
  ::close(srv);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("closed"), std::string::npos) << f.status().to_string();
}

// A header announcing more than the decode side takes is refused before anything is allocated.
TEST(Transfer, AStateOverTheLimitIsRefusedUpFront) {
  Loopback lb;
  ASSERT_TRUE(lb.server);
  FetchOptions small;
  small.max_state_bytes = 1000;
  auto f = fetch_handoff(lb.park("m", std::string(1001, 'x')), small);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kResourceExhausted) << f.status().to_string();
  EXPECT_TRUE(fetch_handoff(lb.park("m", std::string(1000, 'x')), small).ok());
}

}  // namespace
}  // namespace deepinfer::disagg
