// Path independence of the CPU reference forward (DESIGN.md, Numerics): one prefill, any chunking
// into prefill pieces and decode steps, and a serialize/deserialize round trip in the middle all
// give the same logits, in both numerics modes, on every golden fixture model.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>
#include <tuple>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "golden_fixture.h"

namespace deepinfer::v4 {
namespace {

using deepinfer::testing::golden_dir;
using deepinfer::testing::row_rel_err;

constexpr double kTolerance = 1e-5;
// 99 = 6 sliding windows of 16 + 3, 24 CSA windows + 3, 6 HCA windows + 3: never a multiple of 4.
constexpr int64_t kLongLen = 99;
constexpr int64_t kShortLen = 45;

const char* const kFixtures[] = {"mixed_selective", "mixed_fullk", "sliding_hash", "hca_clamp",
                                 "selective_noties"};

const char* numerics_name(Numerics n) { return n == Numerics::kPlain ? "plain" : "official"; }

std::unique_ptr<CpuModel> load_model(const std::string& name, Numerics numerics) {
  auto m = CpuModel::load(golden_dir(name), {numerics, std::nullopt});
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Ids in [2, vocab) from raw mt19937 output (fully specified, so the same on every platform).
std::vector<int32_t> make_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % static_cast<uint32_t>(vocab - 2));
  return ids;
}

// Random prefill pieces of 1..13 tokens up to `prefill`, then single-token decode steps to n.
std::vector<int64_t> random_chunks(int64_t n, int64_t prefill, std::mt19937& rng) {
  std::vector<int64_t> chunks;
  int64_t done = 0;
  while (done < prefill) {
    int64_t c = std::min<int64_t>(1 + rng() % 13, prefill - done);
    chunks.push_back(c);
    done += c;
  }
  for (; done < n; ++done) chunks.push_back(1);
  return chunks;
}

std::string describe(const std::vector<int64_t>& chunks) {
  std::ostringstream s;
  for (size_t i = 0; i < chunks.size(); ++i) s << (i ? "," : "") << chunks[i];
  return s.str();
}

// One prefill of all ids, every position's logits.
std::vector<float> one_prefill(const CpuModel& m, const std::vector<int32_t>& ids) {
  SequenceState s = m.new_sequence();
  std::vector<float> logits;
  Status st = m.forward(s, ids.data(), static_cast<int64_t>(ids.size()), true, &logits);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(s.num_tokens, static_cast<int64_t>(ids.size()));
  return logits;
}

// Feeds ids[begin..] in `chunks` into `s`; after each chunk compares its rows (all of them, or
// only the last when the chunk asked for the last row only) with `want` (rows of all ids).
// Returns the logits it got, in order, for bitwise comparisons between runs.
std::vector<float> run_and_compare(const CpuModel& m, SequenceState& s,
                                   const std::vector<int32_t>& ids, int64_t begin,
                                   const std::vector<int64_t>& chunks,
                                   const std::vector<float>& want, const std::string& what) {
  const int64_t V = m.config().vocab_size;
  std::vector<float> got_all, logits;
  int64_t pos = begin;
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const int64_t n = chunks[ci];
    // Multi-token chunks alternate between all rows and the last row only.
    const bool all_rows = n == 1 || ci % 2 == 0;
    Status st = m.forward(s, &ids[pos], n, all_rows, &logits);
    EXPECT_TRUE(st.ok()) << what << ": " << st.to_string();
    if (!st.ok()) return got_all;
    const int64_t rows = all_rows ? n : 1;
    EXPECT_EQ(static_cast<int64_t>(logits.size()), rows * V) << what;
    if (static_cast<int64_t>(logits.size()) != rows * V) return got_all;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = all_rows ? pos + r : pos + n - 1;
      const double err = row_rel_err(&logits[r * V], &want[p * V], V);
      EXPECT_LE(err, kTolerance) << what << ": position " << p << " (chunk " << ci << " of " << n
                                 << " tokens)";
    }
    got_all.insert(got_all.end(), logits.begin(), logits.end());
    pos += n;
  }
  EXPECT_EQ(s.num_tokens, pos) << what;
  return got_all;
}

class PathIndependence : public ::testing::TestWithParam<std::tuple<const char*, Numerics>> {
 protected:
  void SetUp() override {
    name_ = std::get<0>(GetParam());
    numerics_ = std::get<1>(GetParam());
    model_ = load_model(name_, numerics_);
    ASSERT_NE(model_, nullptr);
    vocab_ = model_->config().vocab_size;
    long_ids_ = make_ids(kLongLen, vocab_, 1234);
    short_ids_ = make_ids(kShortLen, vocab_, 777);
    long_ref_ = one_prefill(*model_, long_ids_);
    short_ref_ = one_prefill(*model_, short_ids_);
    ASSERT_EQ(static_cast<int64_t>(long_ref_.size()), kLongLen * vocab_);
    ASSERT_EQ(static_cast<int64_t>(short_ref_.size()), kShortLen * vocab_);
  }
  std::string tag(const std::string& what) const {
    return std::string(name_) + "/" + numerics_name(numerics_) + " " + what;
  }

  const char* name_ = nullptr;
  Numerics numerics_ = Numerics::kPlain;
  std::unique_ptr<CpuModel> model_;
  int64_t vocab_ = 0;
  std::vector<int32_t> long_ids_, short_ids_;
  std::vector<float> long_ref_, short_ref_;
};

// A shorter one-prefill is the same as the prefix of a longer one (causality; lengths around the
// window, CSA and HCA boundaries).
TEST_P(PathIndependence, ShorterPrefillMatchesPrefixOfLongPrefill) {
  const int64_t V = vocab_;
  for (int64_t len : {1, 2, 3, 5, 15, 16, 17, 31, 33, 50, 63, 65, 98}) {
    std::vector<int32_t> prefix(long_ids_.begin(), long_ids_.begin() + len);
    std::vector<float> got = one_prefill(*model_, prefix);
    ASSERT_EQ(static_cast<int64_t>(got.size()), len * V);
    for (int64_t p = 0; p < len; ++p)
      EXPECT_LE(row_rel_err(&got[p * V], &long_ref_[p * V], V), kTolerance)
          << tag("prefill of " + std::to_string(len)) << ": position " << p;
  }
}

// Pure token-by-token decode from the first token.
TEST_P(PathIndependence, TokenByTokenMatchesOnePrefill) {
  SequenceState s = model_->new_sequence();
  run_and_compare(*model_, s, short_ids_, 0, std::vector<int64_t>(kShortLen, 1), short_ref_,
                  tag("token by token"));
}

TEST_P(PathIndependence, RandomChunkingsMatchOnePrefill) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 5; ++trial) {
    const auto& ids = trial % 2 ? short_ids_ : long_ids_;
    const auto& ref = trial % 2 ? short_ref_ : long_ref_;
    const int64_t n = static_cast<int64_t>(ids.size());
    // Prefill parts from a few tokens to nearly everything; the rest decodes one token at a time.
    const int64_t prefill = std::min<int64_t>(n, 3 + rng() % n);
    std::vector<int64_t> chunks = random_chunks(n, prefill, rng);
    SequenceState s = model_->new_sequence();
    run_and_compare(*model_, s, ids, 0, chunks, ref, tag("chunks [" + describe(chunks) + "]"));
  }
}

// Prefill part, serialize, deserialize into a fresh state, continue: same logits as one prefill,
// and bitwise the same as continuing the original state with the same chunks.
TEST_P(PathIndependence, SerializeResumeMatchesOnePrefill) {
  const Config& c = model_->config();
  std::mt19937 rng(7);
  for (int64_t cut : {1, 3, 7, 16, 21, 33, 50, 67, 98}) {
    const std::string what = tag("cut at " + std::to_string(cut));
    SequenceState orig = model_->new_sequence();
    run_and_compare(*model_, orig, long_ids_, 0, random_chunks(cut, cut, rng), long_ref_,
                    what + " (before)");
    const std::string bytes = orig.serialize();
    auto restored = SequenceState::deserialize(bytes, c);
    ASSERT_TRUE(restored.ok()) << what << ": " << restored.status().to_string();
    EXPECT_EQ(restored->num_tokens, cut) << what;
    EXPECT_EQ(restored->serialize(), bytes) << what << ": round trip changed the bytes";

    const std::vector<int64_t> rest = random_chunks(kLongLen - cut, (kLongLen - cut) / 2, rng);
    std::vector<float> resumed =
        run_and_compare(*model_, *restored, long_ids_, cut, rest, long_ref_, what + " (resumed)");
    std::vector<float> continued =
        run_and_compare(*model_, orig, long_ids_, cut, rest, long_ref_, what + " (continued)");
    ASSERT_EQ(resumed.size(), continued.size()) << what;
    EXPECT_EQ(std::memcmp(resumed.data(), continued.data(), resumed.size() * sizeof(float)), 0)
        << what << ": resumed logits are not bit-identical to the uninterrupted run";
    EXPECT_EQ(restored->serialize(), orig.serialize()) << what << ": states diverged";
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<const char*, Numerics>>& info) {
  return std::string(std::get<0>(info.param)) + "_" + numerics_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PathIndependence,
                         ::testing::Combine(::testing::ValuesIn(kFixtures),
                                            ::testing::Values(Numerics::kPlain,
                                                              Numerics::kOfficial)),
                         param_name);

// ---------------------------------------------------------------------------------------------
// Numerics switch and state (de)serialization errors: per fixture.

class PerFixture : public ::testing::TestWithParam<const char*> {};

// Official numerics fake-quantize activations and KV (spec §4): the logits must move well past
// fp32 noise, or the switch is not wired through.
TEST_P(PerFixture, OfficialAndPlainNumericsDiffer) {
  auto plain = load_model(GetParam(), Numerics::kPlain);
  auto official = load_model(GetParam(), Numerics::kOfficial);
  ASSERT_TRUE(plain && official);
  const int64_t V = plain->config().vocab_size;
  std::vector<int32_t> ids = make_ids(40, V, 99);
  std::vector<float> a = one_prefill(*plain, ids), b = one_prefill(*official, ids);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (int64_t p = 0; p < 40; ++p) worst = std::max(worst, row_rel_err(&b[p * V], &a[p * V], V));
  EXPECT_GT(worst, 1e-3) << GetParam() << ": official and plain logits agree to " << worst;
}

// A state after 37 tokens: every compressor has finished entries and an unfinished window.
std::string state_bytes(const CpuModel& m, int64_t n = 37) {
  SequenceState s = m.new_sequence();
  std::vector<int32_t> ids = make_ids(n, m.config().vocab_size, 5);
  std::vector<float> logits;
  EXPECT_TRUE(m.forward(s, ids.data(), n, false, &logits).ok());
  return s.serialize();
}

void put_u64(std::string& bytes, size_t offset, uint64_t v) { std::memcpy(&bytes[offset], &v, 8); }
uint64_t get_u64(const std::string& bytes, size_t offset) {
  uint64_t v;
  std::memcpy(&v, &bytes[offset], 8);
  return v;
}

TEST_P(PerFixture, DeserializeRejectsTruncatedOrPaddedBytes) {
  auto model = load_model(GetParam(), Numerics::kPlain);
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string bytes = state_bytes(*model);
  ASSERT_TRUE(SequenceState::deserialize(bytes, c).ok());
  std::vector<size_t> lengths;
  for (size_t k = 0; k < 80; ++k) lengths.push_back(k);
  for (size_t k = 80; k < bytes.size(); k += 1 + bytes.size() / 97) lengths.push_back(k);
  for (size_t back : {1, 3, 4, 8}) lengths.push_back(bytes.size() - back);
  for (size_t len : lengths) {
    auto r = SequenceState::deserialize(bytes.substr(0, len), c);
    EXPECT_FALSE(r.ok()) << GetParam() << ": truncated to " << len << " of " << bytes.size();
  }
  for (const std::string& tail : {std::string(1, '\0'), std::string(8, '\0'), std::string("x")})
    EXPECT_FALSE(SequenceState::deserialize(bytes + tail, c).ok())
        << GetParam() << ": " << tail.size() << " trailing bytes accepted";
}

// The header is magic, num_tokens, last_token, layer count (u64 each), then the first layer's
// ring as a length-prefixed float vector.
TEST_P(PerFixture, DeserializeRejectsCorruptHeaderFields) {
  auto model = load_model(GetParam(), Numerics::kPlain);
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string bytes = state_bytes(*model);
  ASSERT_EQ(get_u64(bytes, 8), 37u) << "layout assumption (num_tokens at offset 8) broke";
  ASSERT_EQ(get_u64(bytes, 24), static_cast<uint64_t>(c.num_layers));
  ASSERT_EQ(get_u64(bytes, 32), static_cast<uint64_t>(c.sliding_window) * c.head_dim);

  auto expect_rejected = [&](std::string b, const std::string& what) {
    auto r = SequenceState::deserialize(b, c);
    EXPECT_FALSE(r.ok()) << GetParam() << ": " << what << " accepted";
  };
  std::string b = bytes;
  b[0] ^= 0x01;
  expect_rejected(b, "bad magic");
  b = bytes;
  put_u64(b, 24, c.num_layers + 1);
  expect_rejected(b, "layer count + 1");
  b = bytes;
  put_u64(b, 32, get_u64(bytes, 32) + 1);
  expect_rejected(b, "ring length + 1");
  b = bytes;
  put_u64(b, 32, ~uint64_t{0});
  expect_rejected(b, "ring length 2^64-1");
  // num_tokens must agree with what the state holds: the compressed entries and partial windows
  // (when the model has compressors) or, at least, stay a valid position.
  b = bytes;
  put_u64(b, 8, ~uint64_t{0});
  expect_rejected(b, "num_tokens 2^64-1");
  b = bytes;
  put_u64(b, 8, uint64_t{1} << 63);
  expect_rejected(b, "num_tokens 2^63");
  bool has_compressor = false;
  for (int l = 0; l < c.num_layers; ++l) has_compressor |= c.compress_ratio(l) > 0;
  if (has_compressor) {
    for (uint64_t n : {36, 38, 40, 37 + 16, 37 + 64, 1000}) {
      b = bytes;
      put_u64(b, 8, n);
      expect_rejected(b, "num_tokens " + std::to_string(n) + " (state holds 37)");
    }
  }
}

// A state written for one config does not load into a config of another shape.
TEST(SequenceStateBytes, DeserializeRejectsStateOfAnotherConfig) {
  auto mixed = load_model("mixed_selective", Numerics::kPlain);
  auto sliding = load_model("sliding_hash", Numerics::kPlain);
  auto hca = load_model("hca_clamp", Numerics::kPlain);
  ASSERT_TRUE(mixed && sliding && hca);
  const std::string m = state_bytes(*mixed), s = state_bytes(*sliding), h = state_bytes(*hca);
  EXPECT_FALSE(SequenceState::deserialize(m, sliding->config()).ok());
  EXPECT_FALSE(SequenceState::deserialize(m, hca->config()).ok());
  EXPECT_FALSE(SequenceState::deserialize(s, mixed->config()).ok());
  EXPECT_FALSE(SequenceState::deserialize(h, mixed->config()).ok());
  EXPECT_FALSE(SequenceState::deserialize(std::string(), mixed->config()).ok());
}

// Random byte flips anywhere: deserialize either refuses or yields a state the model can run on
// without crashing (under ASan this catches out-of-bounds reads of a corrupt state).
TEST_P(PerFixture, RandomByteFlipsNeverCrash) {
  auto model = load_model(GetParam(), Numerics::kPlain);
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string bytes = state_bytes(*model, 21);
  std::mt19937 rng(2024);
  const int32_t next[3] = {5, 6, 7};
  int accepted = 0;
  for (int trial = 0; trial < 120; ++trial) {
    std::string b = bytes;
    // Half the flips hit the first 256 bytes, where the structural fields are dense.
    const size_t at = trial % 2 ? rng() % std::min<size_t>(256, b.size()) : rng() % b.size();
    b[at] = static_cast<char>(b[at] ^ (1u << (rng() % 8)));
    auto r = SequenceState::deserialize(b, c);
    if (!r.ok()) continue;
    ++accepted;
    std::vector<float> logits;
    Status st = model->forward(*r, next, 3, true, &logits);
    (void)st;  // a float payload flip may give any values; it must just not crash
  }
  RecordProperty("accepted", accepted);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PerFixture, ::testing::ValuesIn(kFixtures));

}  // namespace
}  // namespace deepinfer::v4
