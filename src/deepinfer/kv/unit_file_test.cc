#include "deepinfer/kv/unit_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "deepinfer/kv/scratch_dir_for_tests.h"

namespace deepinfer::kv {
namespace {

namespace fs = std::filesystem;

// Each test its own directory.
struct ScratchDir : testing::ScratchDir {
  ScratchDir() : testing::ScratchDir("unit_file") {}
};

std::string pattern(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 131 + (i >> 8));
  return s;
}

UnitRecord record(size_t page_bytes, size_t snapshot_bytes) {
  UnitRecord r;
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  r.parent = root_key("unit-file-test");
  r.key = next_key(r.parent, tokens);
  r.end_tokens = 4;
  r.page = pattern(page_bytes, 7);
  r.snapshot = pattern(snapshot_bytes, 91);
  r.expires_at_s = 1'800'000'000 + 7 * 86400;
  r.retention = Retention::kAgent;
  return r;
}

::testing::AssertionResult same(const UnitRecord& a, const UnitRecord& b) {
  if (a.key != b.key) return ::testing::AssertionFailure() << "key";
  if (a.parent != b.parent) return ::testing::AssertionFailure() << "parent";
  if (a.end_tokens != b.end_tokens) return ::testing::AssertionFailure() << "end_tokens";
  if (a.page != b.page) return ::testing::AssertionFailure() << "page bytes";
  if (a.snapshot != b.snapshot) return ::testing::AssertionFailure() << "snapshot bytes";
  if (a.expires_at_s != b.expires_at_s) return ::testing::AssertionFailure() << "expires_at_s";
  if (a.retention != b.retention) return ::testing::AssertionFailure() << "retention";
  return ::testing::AssertionSuccess();
}

void expect_data_loss(const Status& st, const std::string& path, const std::string& fault) {
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.to_string();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(fault), std::string::npos) << st.message();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const LayoutTag kLayout = layout_tag("v4-flash/page64/official");

TEST(UnitFile, RoundTripsWithAndWithoutSnapshot) {
  for (const size_t snapshot_bytes : {size_t{0}, size_t{3000}}) {
    const UnitRecord r = record(5000, snapshot_bytes);
    const std::string bytes = encode_unit(r, kLayout);
    ASSERT_EQ(static_cast<int64_t>(bytes.size()),
              kUnitHeaderBytes + 5000 + static_cast<int64_t>(snapshot_bytes) + kUnitTrailerBytes);
    EXPECT_EQ(bytes.substr(0, 8), "DIKVUNIT");
    const StatusOr<UnitRecord> back = decode_unit(bytes, kLayout, "mem");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_TRUE(same(*back, r));
    EXPECT_EQ(back->has_snapshot(), snapshot_bytes > 0);

    const StatusOr<UnitHeader> h = decode_header(bytes, kLayout, "mem");
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    EXPECT_EQ(h->key, r.key);
    EXPECT_EQ(h->parent, r.parent);
    EXPECT_EQ(h->end_tokens, 4);
    EXPECT_EQ(h->retention, Retention::kAgent);
    EXPECT_EQ(h->expires_at_s, r.expires_at_s);
    EXPECT_EQ(h->page_bytes, 5000);
    EXPECT_EQ(h->snapshot_bytes, static_cast<int64_t>(snapshot_bytes));
    EXPECT_EQ(h->file_bytes(), static_cast<int64_t>(bytes.size()));
  }
}

TEST(UnitFile, EveryFlippedBitIsDataLoss) {
  const std::string good = encode_unit(record(300, 200), kLayout);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    const StatusOr<UnitRecord> r = decode_unit(bad, kLayout, "/x/u.unit");
    ASSERT_FALSE(r.ok()) << "flip at byte " << i << " went unnoticed";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << i;
    EXPECT_NE(r.status().message().find("/x/u.unit"), std::string::npos) << i;
    if (i < static_cast<size_t>(kUnitHeaderBytes)) {
      // The header alone catches its own damage: the start-up scan relies on it.
      EXPECT_FALSE(decode_header(bad, kLayout, "/x/u.unit").ok()) << i;
    }
  }
}

TEST(UnitFile, NamesEachFault) {
  const std::string good = encode_unit(record(300, 0), kLayout);
  const std::string path = "/cache/ab/unit.unit";
  std::string bad = good;
  bad[0] = 'X';
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "bad magic");
  bad = good;
  bad[8] = 9;
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "format version 9");
  bad = good;
  bad[60] ^= 1;  // inside the key
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "header checksum mismatch");
  bad = good;
  bad[kUnitExpiryOffset] ^= 1;
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "torn expiry");
  bad = good;
  bad[kUnitHeaderBytes + 10] ^= 1;
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "checksum mismatch over");
  bad = good;
  bad.back() ^= 1;
  expect_data_loss(decode_unit(bad, kLayout, path).status(), path, "checksum mismatch over");
  expect_data_loss(decode_unit(good + "x", kLayout, path).status(), path, "length mismatch");
  expect_data_loss(decode_unit(good, layout_tag("another model"), path).status(), path,
                   "wrong layout fingerprint");
}

TEST(UnitFile, EveryTruncationIsDataLoss) {
  const std::string good = encode_unit(record(300, 100), kLayout);
  for (size_t n = 0; n < good.size(); ++n) {
    const StatusOr<UnitRecord> r = decode_unit(good.substr(0, n), kLayout, "/c/t.unit");
    ASSERT_FALSE(r.ok()) << n;
    expect_data_loss(r.status(), "/c/t.unit", "truncated");
  }
}

TEST(UnitFile, ReadHeaderChecksTheFileSize) {
  ScratchDir dir;
  const UnitRecord r = record(4000, 1000);
  ASSERT_TRUE(write_file_atomically(dir.path(), "u.unit", encode_unit(r, kLayout)).ok());
  const std::string path = dir.path() + "/u.unit";
  const StatusOr<UnitHeader> h = read_header(path, kLayout);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->key, r.key);
  EXPECT_EQ(h->snapshot_bytes, 1000);
  const StatusOr<UnitRecord> full = read_unit(path, kLayout);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  EXPECT_TRUE(same(*full, r));

  fs::resize_file(path, fs::file_size(path) - 1);
  expect_data_loss(read_header(path, kLayout).status(), path, "truncated");
  expect_data_loss(read_unit(path, kLayout).status(), path, "truncated");
  EXPECT_EQ(read_header(dir.path() + "/gone.unit", kLayout).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(read_unit(dir.path() + "/gone.unit", kLayout).status().code(), StatusCode::kNotFound);
}

TEST(UnitFile, ExpiryRewriteChangesOnlyTheExpiry) {
  ScratchDir dir;
  const UnitRecord r = record(2000, 500);
  ASSERT_TRUE(write_file_atomically(dir.path(), "u.unit", encode_unit(r, kLayout)).ok());
  const std::string path = dir.path() + "/u.unit";
  const std::string before = slurp(path);
  ASSERT_TRUE(write_expiry_in_place(path, r.expires_at_s + 86400).ok());
  const std::string after = slurp(path);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    const bool expiry = i >= static_cast<size_t>(kUnitExpiryOffset) &&
                        i < static_cast<size_t>(kUnitExpiryOffset + 16);
    if (!expiry) {
      ASSERT_EQ(after[i], before[i]) << i;
    }
  }
  const StatusOr<UnitRecord> back = read_unit(path, kLayout);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  UnitRecord want = r;
  want.expires_at_s += 86400;
  EXPECT_TRUE(same(*back, want));
  EXPECT_EQ(write_expiry_in_place(dir.path() + "/gone.unit", 1).code(), StatusCode::kNotFound);
}

TEST(UnitFile, AtomicWriteReplacesAndLeavesOnlyTheFinalName) {
  ScratchDir dir;
  ASSERT_TRUE(write_file_atomically(dir.path(), "f", "first").ok());
  ASSERT_TRUE(write_file_atomically(dir.path(), "f", "second, longer").ok());
  EXPECT_EQ(slurp(dir.path() + "/f"), "second, longer");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"f"});
}

TEST(UnitFile, AtomicWriteFailureNamesThePath) {
  ScratchDir dir;
  const std::string missing = dir.path() + "/no/such/dir";
  const Status st = write_file_atomically(missing, "u.unit", "bytes");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(missing + "/u.unit"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();
}

TEST(UnitFile, RecognisesTempNames) {
  EXPECT_TRUE(is_temp_file_name(std::string(64, 'a') + ".unit.tmp.Ab3xYz"));
  EXPECT_FALSE(is_temp_file_name(std::string(64, 'a') + ".unit"));
  EXPECT_FALSE(is_temp_file_name(".tmp.abcdef"));  // nothing before the suffix
  EXPECT_FALSE(is_temp_file_name("notes.tmp"));
}

}  // namespace
}  // namespace deepinfer::kv
