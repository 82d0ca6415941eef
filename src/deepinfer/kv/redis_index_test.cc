#include "deepinfer/kv/redis_index.h"

#include <gtest/gtest.h>

#include <thread>

#include "deepinfer/kv/redis_test_server.h"
#include "deepinfer/kv/unit_key.h"

namespace deepinfer::kv {
namespace {

constexpr int64_t kAgentTtl = int64_t{3} * 24 * 3600;
constexpr int64_t kChatTtl = int64_t{7} * 24 * 3600;
constexpr char kPrefix[] = "deepinfer:kv:0123456789abcdef:";

// Keys as the cluster tier passes them: unit keys in hex.
std::string unit(int32_t i) {
  const std::vector<int32_t> tokens = {i};
  return next_key(root_key("model-a"), tokens).hex();
}

// Each test gets its own real redis-server on a free port.
class RedisIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status started = server_.start();
    ASSERT_TRUE(started.ok()) << started.to_string();
  }

  // Patient timeouts by default: a loaded CI box must not turn a slow reply into a failure.
  std::unique_ptr<RedisIndex> open(std::string prefix = kPrefix, int reconnect_interval_ms = 0,
                                   int command_timeout_ms = 10'000) {
    RedisIndexOptions options;
    options.url = server_.url();
    options.key_prefix = std::move(prefix);
    options.reconnect_interval_ms = reconnect_interval_ms;
    options.connect_timeout_ms = 10'000;
    options.command_timeout_ms = command_timeout_ms;
    auto index = RedisIndex::connect(options);
    EXPECT_TRUE(index.ok()) << index.status().to_string();
    return index.ok() ? std::move(index).value() : nullptr;
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(server_.port()); }

  RedisTestServer server_;
};

TEST_F(RedisIndexTest, PutGetAndExistsManyRoundTrip) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  const std::string binary("a\0b\r\nc", 6);  // values are binary-safe
  ASSERT_TRUE(index->put(unit(0), "first", kChatTtl).ok());
  ASSERT_TRUE(index->put(unit(2), binary, kAgentTtl).ok());

  EXPECT_EQ(index->get(unit(0)).value(), "first");
  EXPECT_EQ(index->get(unit(1)).value(), std::nullopt);
  EXPECT_EQ(index->get(unit(2)).value(), binary);
  const std::vector<std::string> chain = {unit(0), unit(1), unit(2)};
  EXPECT_EQ(index->exists_many(chain).value(), (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(index->exists_many({}).value().empty());

  EXPECT_TRUE(index->healthy());
  const RedisIndexStats stats = index->stats();
  EXPECT_EQ(stats.ops, 7);
  EXPECT_EQ(stats.errors, 0);
  EXPECT_EQ(stats.reconnects, 0);
}

// TTLs are checked as numbers, never by waiting; the slack only covers the seconds a slow run
// takes between SET and TTL.
TEST_F(RedisIndexTest, PutSetsTheRetentionAsTheKeysTtl) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "agent", kAgentTtl).ok());
  ASSERT_TRUE(index->put(unit(1), "chat", kChatTtl).ok());
  const int64_t agent = index->ttl(unit(0)).value().value();
  const int64_t chat = index->ttl(unit(1)).value().value();
  EXPECT_LE(agent, kAgentTtl);
  EXPECT_GT(agent, kAgentTtl - 60);
  EXPECT_LE(chat, kChatTtl);
  EXPECT_GT(chat, kChatTtl - 60);
  EXPECT_EQ(index->ttl(unit(2)).value(), std::nullopt);
}

TEST_F(RedisIndexTest, ExtendOnlyExtends) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "v", kAgentTtl).ok());
  ASSERT_TRUE(index->extend(unit(0), kChatTtl).ok());
  EXPECT_GT(index->ttl(unit(0)).value().value(), kChatTtl - 60);

  ASSERT_TRUE(index->extend(unit(0), kAgentTtl).ok());  // shorter: ignored
  EXPECT_GT(index->ttl(unit(0)).value().value(), kChatTtl - 60);
  EXPECT_EQ(index->get(unit(0)).value(), "v");

  ASSERT_TRUE(index->extend(unit(1), kChatTtl).ok());  // a missing key stays missing
  EXPECT_EQ(index->exists_many(std::vector<std::string>{unit(1)}).value(),
            std::vector<bool>{false});
}

TEST_F(RedisIndexTest, EraseRemovesTheKey) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "v", kChatTtl).ok());
  ASSERT_TRUE(index->erase(unit(0)).ok());
  EXPECT_EQ(index->get(unit(0)).value(), std::nullopt);
  EXPECT_EQ(index->ttl(unit(0)).value(), std::nullopt);
  EXPECT_EQ(index->exists_many(std::vector<std::string>{unit(0)}).value(),
            std::vector<bool>{false});
  EXPECT_TRUE(index->erase(unit(0)).ok());  // erasing a missing key is fine
}

TEST_F(RedisIndexTest, KeyPrefixIsolatesFingerprints) {
  auto model_a = open("deepinfer:kv:aaaaaaaaaaaaaaaa:");
  auto model_b = open("deepinfer:kv:bbbbbbbbbbbbbbbb:");
  ASSERT_NE(model_a, nullptr);
  ASSERT_NE(model_b, nullptr);
  ASSERT_TRUE(model_a->put(unit(0), "a", kChatTtl).ok());
  EXPECT_EQ(model_b->get(unit(0)).value(), std::nullopt);
  EXPECT_EQ(model_b->exists_many(std::vector<std::string>{unit(0)}).value(),
            std::vector<bool>{false});

  ASSERT_TRUE(model_b->put(unit(0), "b", kChatTtl).ok());
  ASSERT_TRUE(model_b->erase(unit(0)).ok());
  EXPECT_EQ(model_a->get(unit(0)).value(), "a");
}

TEST_F(RedisIndexTest, RejectsANonPositiveTtl) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  const Status put = index->put(unit(0), "v", 0);
  EXPECT_EQ(put.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(put.message().find("ttl_seconds"), std::string::npos) << put.message();
  EXPECT_EQ(index->extend(unit(0), -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(index->get(unit(0)).value(), std::nullopt);
  EXPECT_EQ(index->stats().errors, 2);
  EXPECT_TRUE(index->healthy());
}

// The index is a cache without persistence: a restarted Redis is empty, which reads as misses.
TEST_F(RedisIndexTest, ServerKilledThenRestartedReconnectsEmpty) {
  auto index = open(kPrefix, /*reconnect_interval_ms=*/0);
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "v", kChatTtl).ok());

  server_.stop();
  const auto get = index->get(unit(0));  // finds the connection closed
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(get.status().message().find(address()), std::string::npos) << get.status().message();
  EXPECT_FALSE(index->healthy());
  EXPECT_FALSE(index->put(unit(1), "v", kChatTtl).ok());  // reconnect refused
  EXPECT_FALSE(index->exists_many(std::vector<std::string>{unit(0), unit(1)}).ok());
  EXPECT_FALSE(index->extend(unit(0), kChatTtl).ok());
  EXPECT_FALSE(index->erase(unit(0)).ok());
  EXPECT_FALSE(index->ttl(unit(0)).ok());

  const Status restarted = server_.start();
  ASSERT_TRUE(restarted.ok()) << restarted.to_string();
  EXPECT_EQ(index->get(unit(0)).value(), std::nullopt);  // reconnected; the data is gone
  EXPECT_TRUE(index->healthy());
  ASSERT_TRUE(index->put(unit(0), "again", kChatTtl).ok());
  EXPECT_EQ(index->get(unit(0)).value(), "again");
  EXPECT_EQ(index->stats().reconnects, 1);
  EXPECT_EQ(index->stats().errors, 6);
}

// After a failure the next connect waits for reconnect_interval_ms (here an hour, so the test
// does not depend on time), sparing each request a connect timeout while Redis is down.
TEST_F(RedisIndexTest, ReconnectIsThrottled) {
  auto index = open(kPrefix, /*reconnect_interval_ms=*/3'600'000);
  ASSERT_NE(index, nullptr);
  server_.stop();
  EXPECT_FALSE(index->get(unit(0)).ok());  // drops the connection
  const Status restarted = server_.start();
  ASSERT_TRUE(restarted.ok()) << restarted.to_string();

  const auto throttled = index->get(unit(0));
  ASSERT_FALSE(throttled.ok());
  EXPECT_NE(throttled.status().message().find("unavailable"), std::string::npos)
      << throttled.status().message();
  EXPECT_NE(throttled.status().message().find(address()), std::string::npos);
  EXPECT_FALSE(index->healthy());
  EXPECT_EQ(index->stats().reconnects, 0);
}

// A write larger than the socket buffers to a server that has gone makes write(2) fail with
// EPIPE, raising SIGPIPE; the call must return an error and leave the process alive.
TEST_F(RedisIndexTest, LargeWriteToAStoppedServerIsAnErrorNotASignal) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "v", kChatTtl).ok());
  server_.stop();
  const std::string large(std::size_t{16} << 20, 'x');
  EXPECT_EQ(index->put(unit(1), large, kChatTtl).code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(index->healthy());
}

// A hung server (stopped with SIGSTOP) costs one command timeout; the connection is dropped so
// a late reply can't be read as the answer to a later command.
TEST_F(RedisIndexTest, HungServerTimesOutAndTheNextCallReconnects) {
  auto index = open(kPrefix, /*reconnect_interval_ms=*/0, /*command_timeout_ms=*/200);
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->put(unit(0), "v", kChatTtl).ok());
  server_.pause();
  const auto hung = index->get(unit(0));
  server_.resume();
  ASSERT_FALSE(hung.ok());
  EXPECT_NE(hung.status().message().find("command_timeout_ms"), std::string::npos)
      << hung.status().message();
  EXPECT_EQ(index->get(unit(0)).value(), "v");
  EXPECT_EQ(index->stats().reconnects, 1);
}

// The engine thread and the background writer share one index.
TEST_F(RedisIndexTest, ConcurrentCallersShareOneConnection) {
  auto index = open();
  ASSERT_NE(index, nullptr);
  constexpr int kThreads = 4, kPerThread = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = unit(t * kPerThread + i);
        EXPECT_TRUE(index->put(key, key, kChatTtl).ok());
        EXPECT_EQ(index->get(key).value(), key);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<std::string> keys;
  for (int i = 0; i < kThreads * kPerThread; ++i) keys.push_back(unit(i));
  const std::vector<bool> exists = index->exists_many(keys).value();
  EXPECT_EQ(std::count(exists.begin(), exists.end(), true), kThreads * kPerThread);
  EXPECT_EQ(index->stats().errors, 0);
}

TEST(RedisIndex, MalformedUrlNamesTheFlagAndTheValue) {
  for (const std::string url :
       {"", "127.0.0.1:6379", "http://127.0.0.1:6379", "redis://", "redis://:6379",
        "redis://host:", "redis://host:0", "redis://host:65536", "redis://host:63x9",
        "redis://user:pw@host:6379", "redis://host:6379/0", "redis://[::1", "redis://[::1]x"}) {
    RedisIndexOptions options;
    options.url = url;
    options.key_prefix = kPrefix;
    const auto index = RedisIndex::connect(options);
    ASSERT_FALSE(index.ok()) << url;
    EXPECT_EQ(index.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(index.status().message().find("--kv-cluster-redis '" + url + "'"), std::string::npos)
        << index.status().message();
  }
}

TEST(RedisIndex, RejectsBadOptionsNamingTheField) {
  const auto rejected = [](void (*edit)(RedisIndexOptions&), const char* field) {
    RedisIndexOptions options;
    options.url = "redis://127.0.0.1:1";  // never reached: options are checked first
    options.key_prefix = kPrefix;
    edit(options);
    const auto index = RedisIndex::connect(options);
    ASSERT_FALSE(index.ok()) << field;
    EXPECT_EQ(index.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(index.status().message().find(field), std::string::npos) << index.status().message();
  };
  rejected([](RedisIndexOptions& o) { o.key_prefix.clear(); }, "key_prefix");
  rejected([](RedisIndexOptions& o) { o.connect_timeout_ms = 0; }, "connect_timeout_ms");
  rejected([](RedisIndexOptions& o) { o.command_timeout_ms = -5; }, "command_timeout_ms");
  rejected([](RedisIndexOptions& o) { o.reconnect_interval_ms = -1; }, "reconnect_interval_ms");
}

// The server flag's startup check: nothing listens, so connect fails and names the address.
TEST(RedisIndex, ConnectToAClosedPortNamesTheAddress) {
  const int port = free_loopback_port();
  ASSERT_NE(port, 0);
  RedisIndexOptions options;
  options.url = "redis://127.0.0.1:" + std::to_string(port);
  options.key_prefix = kPrefix;
  const auto index = RedisIndex::connect(options);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = index.status().message();
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_NE(message.find("--kv-cluster-redis"), std::string::npos) << message;
}

}  // namespace
}  // namespace deepinfer::kv
