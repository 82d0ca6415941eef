#include "deepinfer/kv/disk_tier.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "deepinfer/kv/scratch_dir_for_tests.h"

namespace deepinfer::kv {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDay = 86400;
constexpr int64_t kOverhead = kUnitHeaderBytes + kUnitTrailerBytes;
constexpr char kFingerprint[] = "v4-flash/page64/official";

// Each test its own directory.
struct ScratchDir : testing::ScratchDir {
  ScratchDir() : testing::ScratchDir("disk_tier") {}
};

UnitKey key_of(int i) {
  const std::vector<int32_t> tokens = {i, i + 1};
  return next_key(root_key(kFingerprint), tokens);
}

// Deterministic content per (unit, version), so a reader can tell exactly what was written.
std::string fill(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) {
      x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 27, x *= 0x94D049BB133111EBull;
      x ^= x >> 31;
    }
    s[i] = static_cast<char>(x >> (8 * (i % 8)));
  }
  return s;
}

UnitRecord unit(int i, size_t page_bytes, size_t snapshot_bytes, int64_t expires_at_s) {
  UnitRecord r;
  r.key = key_of(i);
  r.parent = i > 0 ? key_of(i - 1) : UnitKey{};
  r.end_tokens = 64 * (i + 1);
  r.page = fill(page_bytes, 2 * static_cast<uint64_t>(i));
  r.snapshot = fill(snapshot_bytes, 2 * static_cast<uint64_t>(i) + 1);
  r.expires_at_s = expires_at_s;
  r.retention = Retention::kChat;
  return r;
}

::testing::AssertionResult same(const std::optional<UnitRecord>& a, const UnitRecord& b) {
  if (!a) return ::testing::AssertionFailure() << "missing";
  if (a->key != b.key) return ::testing::AssertionFailure() << "key";
  if (a->parent != b.parent) return ::testing::AssertionFailure() << "parent";
  if (a->end_tokens != b.end_tokens) return ::testing::AssertionFailure() << "end_tokens";
  if (a->page != b.page) return ::testing::AssertionFailure() << "page bytes";
  if (a->snapshot != b.snapshot) return ::testing::AssertionFailure() << "snapshot bytes";
  if (a->expires_at_s != b.expires_at_s) return ::testing::AssertionFailure() << "expires_at_s";
  if (a->retention != b.retention) return ::testing::AssertionFailure() << "retention";
  return ::testing::AssertionSuccess();
}

// Every regular file below `dir`, relative paths.
std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t temp_files_under(const std::string& dir) {
  int64_t n = 0;
  for (const std::string& f : files_under(dir))
    n += is_temp_file_name(fs::path(f).filename().string());
  return n;
}

void flip_byte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(offset);
  f.write(&c, 1);
}

class DiskTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskTier> open_tier(int64_t capacity = int64_t{1} << 30,
                                      const std::string& fingerprint = kFingerprint) {
    DiskTierOptions o;
    o.dir = dir_.path() + "/cache";
    o.capacity_bytes = capacity;
    o.fingerprint = fingerprint;
    o.clock = &clock_;
    StatusOr<std::unique_ptr<DiskTier>> t = DiskTier::open(o);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? std::move(t).value() : nullptr;
  }
  std::string cache_dir() const { return dir_.path() + "/cache"; }
  int64_t later(int64_t seconds) const { return clock_.now_unix_s() + seconds; }

  ScratchDir dir_;
  ManualClock clock_;
};

TEST_F(DiskTierTest, PutThenGetReturnsTheExactRecordWithAndWithoutSnapshot) {
  auto tier = open_tier();
  const UnitRecord plain = unit(0, 4096, 0, later(7 * kDay));
  const UnitRecord with_snapshot = unit(1, 4096, 10000, later(3 * kDay));
  ASSERT_TRUE(tier->put(plain).ok());
  ASSERT_TRUE(tier->put(with_snapshot).ok());
  EXPECT_TRUE(same(tier->get(plain.key), plain));
  EXPECT_TRUE(same(tier->get(with_snapshot.key), with_snapshot));
  EXPECT_FALSE(tier->get(key_of(2)).has_value());

  EXPECT_TRUE(tier->contains(plain.key));
  EXPECT_FALSE(tier->contains(key_of(2)));
  const std::optional<UnitInfo> info = tier->info(with_snapshot.key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->end_tokens, 128);
  EXPECT_TRUE(info->has_snapshot);
  EXPECT_EQ(info->bytes, 4096 + 10000 + kOverhead);
  EXPECT_FALSE(tier->info(plain.key)->has_snapshot);

  const std::string hex = plain.key.hex();
  EXPECT_EQ(tier->path_of(plain.key), cache_dir() + "/" + hex.substr(0, 2) + "/" + hex + ".unit");
  EXPECT_TRUE(fs::exists(tier->path_of(plain.key)));
  const int64_t total = 4096 + 4096 + 10000 + 2 * kOverhead;
  EXPECT_EQ(tier->units(), 2);
  EXPECT_EQ(tier->bytes(), total);
  const DiskTierStats s = tier->stats();
  EXPECT_EQ(s.bytes_written, total);
  EXPECT_EQ(s.bytes_read, total);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.misses, 1);
}

TEST_F(DiskTierTest, ReopenSeesEveryUnitWithIdenticalBytes) {
  std::vector<UnitRecord> units;
  for (int i = 0; i < 6; ++i) units.push_back(unit(i, 3000 + i, i % 2 ? 5000 : 0, later(kDay)));
  int64_t bytes = 0;
  {
    auto tier = open_tier();
    for (const UnitRecord& u : units) ASSERT_TRUE(tier->put(u).ok());
    bytes = tier->bytes();
  }
  auto tier = open_tier();
  EXPECT_EQ(tier->units(), 6);
  EXPECT_EQ(tier->bytes(), bytes);
  EXPECT_EQ(tier->stats().removed_at_open, 0);
  for (const UnitRecord& u : units) {
    EXPECT_EQ(tier->info(u.key)->has_snapshot, u.has_snapshot());
    EXPECT_EQ(tier->info(u.key)->end_tokens, u.end_tokens);
    EXPECT_TRUE(same(tier->get(u.key), u));
  }
}

TEST_F(DiskTierTest, PuttingTheSnapshotVersionReplacesTheUnit) {
  auto tier = open_tier();
  const UnitRecord first = unit(3, 2048, 0, later(kDay));
  UnitRecord second = unit(3, 2048, 8192, later(2 * kDay));
  ASSERT_TRUE(tier->put(first).ok());
  ASSERT_TRUE(tier->put(second).ok());
  EXPECT_EQ(tier->units(), 1);
  EXPECT_EQ(tier->bytes(), 2048 + 8192 + kOverhead);
  EXPECT_TRUE(tier->info(second.key)->has_snapshot);
  EXPECT_TRUE(same(tier->get(second.key), second));
  EXPECT_EQ(files_under(cache_dir()).size(), 1u);
}

TEST_F(DiskTierTest, TruncatedFileIsDroppedAtGetAndAtOpen) {
  const UnitRecord a = unit(0, 5000, 0, later(kDay)), b = unit(1, 5000, 0, later(kDay));
  {
    auto tier = open_tier();
    ASSERT_TRUE(tier->put(a).ok());
    ASSERT_TRUE(tier->put(b).ok());
    fs::resize_file(tier->path_of(a.key), 3000);
    EXPECT_FALSE(tier->get(a.key).has_value());
    EXPECT_FALSE(tier->contains(a.key));
    EXPECT_FALSE(fs::exists(tier->path_of(a.key)));
    EXPECT_EQ(tier->stats().corrupt_dropped, 1);
    EXPECT_EQ(tier->units(), 1);
    EXPECT_EQ(tier->bytes(), 5000 + kOverhead);
    fs::resize_file(tier->path_of(b.key), 5000);  // cut into the payload; the header is whole
  }
  auto tier = open_tier();
  EXPECT_EQ(tier->units(), 0);
  EXPECT_EQ(tier->stats().removed_at_open, 1);
  EXPECT_TRUE(files_under(cache_dir()).empty());
}

TEST_F(DiskTierTest, FlippedPayloadBitIsAMissAndTheFileIsDeleted) {
  auto tier = open_tier();
  const UnitRecord a = unit(0, 5000, 2000, later(kDay)), b = unit(1, 5000, 0, later(kDay));
  ASSERT_TRUE(tier->put(a).ok());
  ASSERT_TRUE(tier->put(b).ok());
  flip_byte(tier->path_of(a.key), kUnitHeaderBytes + 6000);  // inside the snapshot
  EXPECT_FALSE(tier->get(a.key).has_value());
  EXPECT_FALSE(fs::exists(tier->path_of(a.key)));
  EXPECT_FALSE(tier->contains(a.key));
  EXPECT_TRUE(same(tier->get(b.key), b));
  const DiskTierStats s = tier->stats();
  EXPECT_EQ(s.corrupt_dropped, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(tier->sweep().corrupt, 1);
  EXPECT_EQ(tier->sweep().corrupt, 0);  // counted once
}

TEST_F(DiskTierTest, FlippedHeaderBitIsDroppedAtGetAndAtOpen) {
  const UnitRecord a = unit(0, 1000, 0, later(kDay)), b = unit(1, 1000, 0, later(kDay));
  {
    auto tier = open_tier();
    ASSERT_TRUE(tier->put(a).ok());
    ASSERT_TRUE(tier->put(b).ok());
    flip_byte(tier->path_of(a.key), 100);  // parent
    EXPECT_FALSE(tier->get(a.key).has_value());
    EXPECT_FALSE(fs::exists(tier->path_of(a.key)));
    flip_byte(tier->path_of(b.key), 120);  // page length
  }
  auto tier = open_tier();
  EXPECT_EQ(tier->units(), 0);
  EXPECT_EQ(tier->stats().removed_at_open, 1);
  EXPECT_FALSE(tier->get(b.key).has_value());
  EXPECT_TRUE(files_under(cache_dir()).empty());
}

TEST_F(DiskTierTest, UnitsOfAnotherFingerprintAreDeletedAtOpen) {
  {
    auto tier = open_tier(int64_t{1} << 30, "another model");
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(tier->put(unit(i, 1000, 0, later(kDay))).ok());
  }
  auto tier = open_tier();
  EXPECT_EQ(tier->units(), 0);
  EXPECT_EQ(tier->stats().removed_at_open, 3);
  EXPECT_FALSE(tier->get(key_of(0)).has_value());
  EXPECT_TRUE(files_under(cache_dir()).empty());
}

TEST_F(DiskTierTest, HalfWrittenTempFileIsRemovedAtOpenAndNeverLoaded) {
  const UnitRecord a = unit(0, 4000, 4000, later(kDay));
  const std::string hex = a.key.hex();
  const std::string encoded = encode_unit(a, layout_tag(kFingerprint));
  fs::create_directories(cache_dir() + "/" + hex.substr(0, 2));
  const std::string temp = cache_dir() + "/" + hex.substr(0, 2) + "/" + hex + ".unit.tmp.a1B2c3";
  std::ofstream(temp, std::ios::binary) << encoded.substr(0, encoded.size() / 2);
  // A complete temp file too: the crash may come between the fsync and the rename.
  const std::string whole = cache_dir() + "/" + hex.substr(0, 2) + "/" + hex + ".unit.tmp.zZ9yY8";
  std::ofstream(whole, std::ios::binary) << encoded;
  std::ofstream(cache_dir() + "/README") << "not a unit";
  auto tier = open_tier();
  EXPECT_EQ(tier->stats().removed_at_open, 2);
  EXPECT_EQ(tier->units(), 0);
  EXPECT_FALSE(tier->get(a.key).has_value());
  EXPECT_EQ(files_under(cache_dir()), std::vector<std::string>{"README"});  // others' files stay
}

TEST_F(DiskTierTest, SigkillMidWriteLeavesOnlyCompleteUnits) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr size_t kPage = 1 << 20, kSnapshot = 1 << 19;
  const int64_t expiry = later(7 * kDay);
  // Version 0 of unit i has no snapshot; version 1 replaces it with one.
  auto version = [&](int i, int v) { return unit(i, kPage, v ? kSnapshot : 0, expiry); };
  std::map<int, int> acked;  // unit -> newest version whose put returned
  int next = 0;
  for (int round = 0; round < 6; ++round, next += 1000) {
    int acks[2];
    ASSERT_EQ(::pipe(acks), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(acks[0]);
      DiskTierOptions o{cache_dir(), int64_t{1} << 40, kFingerprint, &clock_};
      StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::open(o);
      if (!tier.ok()) ::_exit(2);
      for (int i = next; i < next + 1000; ++i) {
        for (int v = 0; v < 2; ++v) {
          if (!(*tier)->put(version(i, v)).ok()) ::_exit(3);
          const int ack[2] = {i, v};
          if (::write(acks[1], ack, sizeof ack) != sizeof ack) ::_exit(4);
        }
      }
      ::_exit(0);
    }
    ::close(acks[1]);
    auto read_ack = [&]() {
      int ack[2];
      if (::read(acks[0], ack, sizeof ack) != sizeof ack) return false;
      acked[ack[0]] = std::max(acked[ack[0]], ack[1]);
      return true;
    };
    const int wait_for = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < wait_for; ++k) ASSERT_TRUE(read_ack());
    ::usleep(static_cast<useconds_t>(rng() % 30000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer finished before it was killed";
    while (read_ack()) {
    }
    ::close(acks[0]);

    auto tier = open_tier(int64_t{1} << 40);
    EXPECT_EQ(temp_files_under(cache_dir()), 0);
    // Every unit file left verifies and holds exactly one version's bytes.
    int64_t on_disk = 0;
    for (const std::string& f : files_under(cache_dir())) {
      const std::optional<UnitKey> key = UnitKey::from_hex(fs::path(f).stem().string());
      ASSERT_TRUE(key.has_value()) << f;
      int i = -1;
      for (int j = 0; j < next + 1000 && i < 0; ++j) i = key_of(j) == *key ? j : -1;
      ASSERT_GE(i, 0) << f;
      const std::optional<UnitRecord> got = tier->get(*key);
      ASSERT_TRUE(got.has_value()) << f;
      EXPECT_TRUE(same(got, version(i, got->has_snapshot() ? 1 : 0))) << f;
      ++on_disk;
    }
    // Every put that returned survives, as the version it last acknowledged or a later one.
    for (const auto& [i, v] : acked) {
      const std::optional<UnitRecord> got = tier->get(key_of(i));
      ASSERT_TRUE(got.has_value()) << "acknowledged unit " << i << " is gone";
      EXPECT_GE(got->has_snapshot() ? 1 : 0, v) << i;
    }
    EXPECT_EQ(tier->units(), on_disk);
    EXPECT_EQ(tier->stats().corrupt_dropped, 0);
  }
}

// A full disk, simulated by a file-size limit: writes past it fail with EFBIG.
TEST_F(DiskTierTest, FullDiskFailsNamingThePathAndLeavesNothingPartial) {
  const UnitRecord small = unit(0, 1000, 0, later(kDay));
  const UnitRecord big = unit(1, 200 * 1024, 0, later(kDay));
  const UnitRecord small_grown = unit(0, 1000, 200 * 1024, later(kDay));
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(out[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(2);
    DiskTierOptions o{cache_dir(), int64_t{1} << 30, kFingerprint, &clock_};
    StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::open(o);
    if (!tier.ok() || !(*tier)->put(small).ok()) ::_exit(3);
    std::ostringstream report;
    for (const UnitRecord* r : {&big, &small_grown}) {
      const Status st = (*tier)->put(*r);
      report << static_cast<int>(st.code()) << "\n" << st.message() << "\n";
    }
    report << (*tier)->units() << " " << (*tier)->bytes() << " " << (*tier)->contains(big.key)
           << " " << (*tier)->info(small.key)->has_snapshot << " "
           << same((*tier)->get(small.key), small) << " " << (*tier)->stats().io_errors << "\n";
    const std::string text = report.str();
    if (::write(out[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  std::istringstream in(text);
  std::string code, message;
  const std::string paths[2] = {
      cache_dir() + "/" + big.key.hex().substr(0, 2) + "/" + big.key.hex() + ".unit",
      cache_dir() + "/" + small.key.hex().substr(0, 2) + "/" + small.key.hex() + ".unit"};
  for (const std::string& path : paths) {
    std::getline(in, code);
    std::getline(in, message);
    EXPECT_EQ(code, std::to_string(static_cast<int>(StatusCode::kResourceExhausted)));
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  }
  int64_t units = 0, bytes = 0, io_errors = 0;
  bool contains_big = true, small_has_snapshot = true, small_intact = false;
  in >> units >> bytes >> contains_big >> small_has_snapshot >> small_intact >> io_errors;
  EXPECT_EQ(units, 1);
  EXPECT_EQ(bytes, 1000 + kOverhead);
  EXPECT_FALSE(contains_big);
  EXPECT_FALSE(small_has_snapshot);
  EXPECT_TRUE(small_intact);
  EXPECT_EQ(io_errors, 2);

  EXPECT_EQ(temp_files_under(cache_dir()), 0);
  EXPECT_FALSE(fs::exists(paths[0]));
  auto tier = open_tier();
  EXPECT_EQ(tier->units(), 1);
  EXPECT_EQ(tier->stats().removed_at_open, 0);
  EXPECT_TRUE(same(tier->get(small.key), small));
  ASSERT_TRUE(tier->put(big).ok());  // without the limit the same put succeeds
  EXPECT_TRUE(same(tier->get(big.key), big));
}

TEST_F(DiskTierTest, ExpiryIsHonouredAndTouchExtendsIt) {
  const int64_t t0 = clock_.now_unix_s();
  const UnitRecord agent = unit(0, 1000, 0, t0 + 3 * kDay);
  const UnitRecord chat = unit(1, 1000, 500, t0 + 7 * kDay);
  {
    auto tier = open_tier();
    ASSERT_TRUE(tier->put(agent).ok());
    ASSERT_TRUE(tier->put(chat).ok());
    clock_.set(t0 + 3 * kDay - 1);
    EXPECT_TRUE(tier->contains(agent.key));
    // A hit at day 3 extends the agent unit by another 3 days.
    EXPECT_TRUE(same(tier->get(agent.key), agent));
    tier->touch(agent.key, clock_.now_unix_s() + 3 * kDay);
    tier->touch(chat.key, t0 + kDay);  // never shortens
    clock_.set(t0 + 6 * kDay - 2);
    ASSERT_TRUE(tier->contains(agent.key));
    UnitRecord extended = agent;
    extended.expires_at_s = t0 + 6 * kDay - 1;
    EXPECT_TRUE(same(tier->get(agent.key), extended));  // the file's header carries it
    clock_.set(t0 + 6 * kDay - 1);                      // expires_at_s <= now: gone
    EXPECT_FALSE(tier->contains(agent.key));
    EXPECT_FALSE(tier->info(agent.key).has_value());
    tier->touch(agent.key, t0 + 100 * kDay);  // an expired unit is not revived
    EXPECT_FALSE(tier->get(agent.key).has_value());
    EXPECT_FALSE(fs::exists(tier->path_of(agent.key)));
    EXPECT_EQ(tier->stats().evicted_expired, 1);
    EXPECT_TRUE(same(tier->get(chat.key), chat));
  }
  {
    auto tier = open_tier();  // the extension and the chat expiry survive a restart
    EXPECT_EQ(tier->units(), 1);
    clock_.set(t0 + 7 * kDay - 1);
    EXPECT_TRUE(same(tier->get(chat.key), chat));
    clock_.set(t0 + 7 * kDay);
    const EvictionCounts swept = tier->sweep();
    EXPECT_EQ(swept.expired, 1);
    EXPECT_EQ(swept.capacity, 0);
    EXPECT_EQ(tier->units(), 0);
    EXPECT_EQ(tier->bytes(), 0);
    EXPECT_TRUE(files_under(cache_dir()).empty());
  }
  ASSERT_TRUE(open_tier()->put(unit(2, 100, 0, clock_.now_unix_s() + 10)).ok());
  clock_.advance(10);
  auto tier = open_tier();  // expired while closed: dropped at open
  EXPECT_EQ(tier->units(), 0);
  EXPECT_EQ(tier->stats().evicted_expired, 1);
}

TEST_F(DiskTierTest, CapacityEvictsLeastRecentlyUsedAndAReadUnitSurvives) {
  constexpr int64_t kUnit = 1000 + kOverhead;
  auto tier = open_tier(3 * kUnit);
  std::vector<UnitRecord> u;
  for (int i = 0; i < 5; ++i) u.push_back(unit(i, 1000, 0, later(kDay)));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(tier->put(u[i]).ok());
  EXPECT_TRUE(same(tier->get(u[0].key), u[0]));  // 0 becomes the most recent
  ASSERT_TRUE(tier->put(u[3]).ok());             // evicts 1
  EXPECT_FALSE(tier->contains(u[1].key));
  EXPECT_FALSE(fs::exists(tier->path_of(u[1].key)));
  for (int i : {0, 2, 3}) EXPECT_TRUE(tier->contains(u[i].key)) << i;
  tier->touch(u[2].key, later(2 * kDay));  // a touch is a use too: order now 0, 3, 2
  u[2].expires_at_s = later(2 * kDay);
  ASSERT_TRUE(tier->put(u[4]).ok());  // evicts 0
  EXPECT_FALSE(tier->contains(u[0].key));
  for (int i : {2, 3, 4}) EXPECT_TRUE(same(tier->get(u[i].key), u[i])) << i;
  EXPECT_EQ(tier->bytes(), 3 * kUnit);
  EXPECT_EQ(tier->stats().evicted_capacity, 2);
  EXPECT_EQ(files_under(cache_dir()).size(), 3u);

  const Status too_big = tier->put(unit(9, 3 * kUnit, 0, later(kDay)));
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("capacity_bytes"), std::string::npos) << too_big.message();
  EXPECT_EQ(tier->units(), 3);
}

TEST_F(DiskTierTest, ReopenWithLessCapacityEvictsTheLeastRecentlyWritten) {
  constexpr int64_t kUnit = 1000 + kOverhead;
  std::vector<UnitRecord> u;
  for (int i = 0; i < 3; ++i) u.push_back(unit(i, 1000, 0, later(kDay)));
  {
    auto tier = open_tier();
    for (const UnitRecord& r : u) ASSERT_TRUE(tier->put(r).ok());
    // Write times stand in for use at start-up; set them so the order is known: 1, 2, 0.
    const auto now = fs::file_time_type::clock::now();
    fs::last_write_time(tier->path_of(u[0].key), now);
    fs::last_write_time(tier->path_of(u[1].key), now - std::chrono::hours(2));
    fs::last_write_time(tier->path_of(u[2].key), now - std::chrono::hours(1));
  }
  auto tier = open_tier(2 * kUnit);
  EXPECT_EQ(tier->units(), 2);
  EXPECT_FALSE(tier->contains(u[1].key));
  EXPECT_FALSE(fs::exists(tier->path_of(u[1].key)));
  EXPECT_TRUE(same(tier->get(u[0].key), u[0]));
  EXPECT_TRUE(same(tier->get(u[2].key), u[2]));
  EXPECT_EQ(tier->stats().evicted_capacity, 1);
}

TEST_F(DiskTierTest, ConcurrentPutsGetsAndTouchesKeepIndexAndFilesInStep) {
  constexpr int kKeys = 12;
  constexpr int64_t kCapacity = 8 * (2000 + 3000 + kOverhead);
  auto tier = open_tier(kCapacity);
  const int64_t expiry = later(kDay);
  auto version = [&](int i, int v) { return unit(i, 2000, v ? 3000 : 0, expiry); };
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0}, hits{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < 300; ++op) {
        const int i = static_cast<int>(rng() % kKeys);
        switch (rng() % 3) {
          case 0:
            if (!tier->put(version(i, static_cast<int>(rng() % 2))).ok()) ++wrong;
            break;
          case 1: {
            std::optional<UnitRecord> got = tier->get(key_of(i));
            if (!got) break;
            ++hits;
            got->expires_at_s = expiry;  // touches may have moved it
            if (!same(got, version(i, got->has_snapshot() ? 1 : 0))) ++wrong;
            break;
          }
          default:
            tier->touch(key_of(i), expiry + static_cast<int64_t>(rng() % 1000));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(temp_files_under(cache_dir()), 0);
  int64_t file_bytes = 0;
  const std::vector<std::string> files = files_under(cache_dir());
  for (const std::string& f : files) file_bytes += fs::file_size(cache_dir() + "/" + f);
  EXPECT_EQ(tier->units(), static_cast<int64_t>(files.size()));
  EXPECT_EQ(tier->bytes(), file_bytes);
  EXPECT_LE(tier->bytes(), kCapacity);
  const DiskTierStats s = tier->stats();
  EXPECT_EQ(s.corrupt_dropped, 0);
  EXPECT_EQ(s.io_errors, 0);
}

TEST(DiskTier, OpenRejectsBadOptionsNamingTheField) {
  ScratchDir dir;
  DiskTierOptions o{dir.path() + "/c", 1 << 20, "fp", nullptr};
  o.capacity_bytes = 0;
  StatusOr<std::unique_ptr<DiskTier>> t = DiskTier::open(o);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("capacity_bytes"), std::string::npos);
  o.capacity_bytes = 1 << 20;
  o.fingerprint.clear();
  EXPECT_NE(DiskTier::open(o).status().message().find("fingerprint"), std::string::npos);
  o.fingerprint = "fp";
  std::ofstream(dir.path() + "/file") << "x";
  o.dir = dir.path() + "/file/cache";  // below a regular file: can't be created
  t = DiskTier::open(o);
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(o.dir), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace deepinfer::kv
