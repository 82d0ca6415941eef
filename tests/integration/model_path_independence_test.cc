// Path independence of the CPU reference forward (DESIGN.md, Numerics): one prefill, any chunking
// into prefill pieces and decode steps, and a serialize/deserialize round trip in the middle all
// give the same logits, in both numerics modes, on every golden fixture model.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "golden_fixture.h"

namespace deepinfer::v4 {
namespace {

using deepinfer::testing::golden_dir;
using deepinfer::testing::make_ids;
using deepinfer::testing::row_rel_err;

constexpr double kTolerance = 1e-5;
// 71 = 4 sliding windows of 16 + 7, 17 CSA windows + 3, 4 HCA windows + 7: never a multiple of 4.
// Short, because this binary also runs under ASan+UBSan in CI.
constexpr int64_t kLen = 71;

const char* const kFixtures[] = {"mixed_selective", "mixed_fullk", "sliding_hash", "hca_clamp",
                                 "selective_noties"};

const char* numerics_name(Numerics n) { return n == Numerics::kPlain ? "plain" : "official"; }

std::unique_ptr<CpuModel> load_model(const std::string& name, Numerics numerics) {
  auto m = CpuModel::load(golden_dir(name), ModelOptions::with_numerics(numerics));
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
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

// A model with its reference: one prefill of kLen ids. Built once per fixture and numerics.
struct Reference {
  std::unique_ptr<CpuModel> model;
  std::vector<int32_t> ids;
  std::vector<float> logits;  // kLen x vocab
};

const Reference& reference(const std::string& name, Numerics numerics) {
  static std::map<std::pair<std::string, Numerics>, Reference> cache;
  auto [it, fresh] = cache.try_emplace({name, numerics});
  Reference& r = it->second;
  if (fresh) {
    r.model = load_model(name, numerics);
    if (r.model) {
      r.ids = make_ids(kLen, r.model->config().vocab_size, 1234);
      r.logits = one_prefill(*r.model, r.ids);
    }
  }
  return r;
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

// Feeds ids[0, sum(chunks)) in `chunks` into a fresh sequence and compares every row it gets with
// the one-prefill reference (multi-token chunks alternate between all rows and the last row
// only). At the first chunk boundary at or past each of `cuts`, the state goes through
// serialize -> deserialize: the round trip must keep the bytes, the next chunk must give
// bit-identical logits and states from the original and the restored state, and the run then
// continues on the restored one.
void run_and_compare(const CpuModel& m, const Reference& ref, const std::vector<int64_t>& chunks,
                     std::vector<int64_t> cuts, const std::string& what) {
  const int64_t V = m.config().vocab_size;
  SequenceState s = m.new_sequence();
  std::vector<float> logits;
  int64_t pos = 0;
  std::string where = what + " chunks [" + describe(chunks) + "]";
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    std::optional<SequenceState> original;
    if (!cuts.empty() && pos >= cuts.front()) {
      while (!cuts.empty() && pos >= cuts.front()) cuts.erase(cuts.begin());
      where += ", resumed at " + std::to_string(pos);
      const std::string bytes = s.serialize();
      auto restored = SequenceState::deserialize(bytes, m.config());
      ASSERT_TRUE(restored.ok()) << where << ": " << restored.status().to_string();
      ASSERT_EQ(restored->num_tokens, pos) << where;
      ASSERT_EQ(restored->serialize(), bytes) << where << ": round trip changed the bytes";
      original = std::move(s);
      s = std::move(restored).value();
    }
    const int64_t n = chunks[ci];
    const bool all_rows = n == 1 || ci % 2 == 0;
    Status st = m.forward(s, &ref.ids[pos], n, all_rows, &logits);
    ASSERT_TRUE(st.ok()) << where << ": " << st.to_string();
    const int64_t rows = all_rows ? n : 1;
    ASSERT_EQ(static_cast<int64_t>(logits.size()), rows * V) << where;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = all_rows ? pos + r : pos + n - 1;
      EXPECT_LE(row_rel_err(&logits[r * V], &ref.logits[p * V], V), kTolerance)
          << where << ": position " << p << " (chunk " << ci << " of " << n << " tokens)";
    }
    if (original) {
      std::vector<float> again;
      ASSERT_TRUE(m.forward(*original, &ref.ids[pos], n, all_rows, &again).ok());
      ASSERT_EQ(again.size(), logits.size());
      EXPECT_EQ(std::memcmp(again.data(), logits.data(), again.size() * sizeof(float)), 0)
          << where << ": restored state's logits are not bit-identical to the original's";
      EXPECT_EQ(original->serialize(), s.serialize()) << where << ": states diverged";
    }
    pos += n;
  }
  EXPECT_EQ(s.num_tokens, pos) << where;
}

std::vector<int64_t> ones(int64_t n) { return std::vector<int64_t>(n, 1); }

class PathIndependence : public ::testing::TestWithParam<std::tuple<const char*, Numerics>> {
 protected:
  void SetUp() override {
    name_ = std::get<0>(GetParam());
    numerics_ = std::get<1>(GetParam());
    ref_ = &reference(name_, numerics_);
    ASSERT_NE(ref_->model, nullptr);
    ASSERT_EQ(static_cast<int64_t>(ref_->logits.size()), kLen * ref_->model->config().vocab_size);
  }
  std::string tag() const { return std::string(name_) + "/" + numerics_name(numerics_); }
  const CpuModel& model() const { return *ref_->model; }

  const char* name_ = nullptr;
  Numerics numerics_ = Numerics::kPlain;
  const Reference* ref_ = nullptr;
};

// A shorter one-prefill is the prefix of the long one (lengths around window/CSA/HCA boundaries).
TEST_P(PathIndependence, ShorterPrefillMatchesPrefix) {
  for (int64_t len : {1, 3, 17}) run_and_compare(model(), *ref_, {len}, {}, tag());
}

// (b) Seeded random chunkings: prefill pieces of 1..13 tokens, then decode steps.
TEST_P(PathIndependence, RandomChunkingsMatchOnePrefill) {
  std::mt19937 rng(42);
  run_and_compare(model(), *ref_, random_chunks(kLen, 45, rng), {}, tag());
  run_and_compare(model(), *ref_, random_chunks(37, 21, rng), {}, tag());
  run_and_compare(model(), *ref_, ones(20), {}, tag() + " token by token");
}

// (c) Prefill part, serialize, deserialize into a fresh state, continue: cuts mid-window, at the
// window/HCA boundary, after several windows and in the decode phase.
TEST_P(PathIndependence, SerializeResumeMatchesOnePrefill) {
  std::mt19937 rng(7);
  run_and_compare(model(), *ref_, random_chunks(kLen, 40, rng), {3, 16, 30, 55}, tag());
  run_and_compare(model(), *ref_, ones(8), {1, 5}, tag() + " token by token");
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
  const Reference& plain = reference(GetParam(), Numerics::kPlain);
  const Reference& official = reference(GetParam(), Numerics::kOfficial);
  ASSERT_TRUE(plain.model && official.model);
  ASSERT_EQ(plain.ids, official.ids);
  ASSERT_EQ(plain.logits.size(), official.logits.size());
  const int64_t V = plain.model->config().vocab_size;
  double worst = 0;
  for (int64_t p = 0; p < kLen; ++p)
    worst = std::max(worst, row_rel_err(&official.logits[p * V], &plain.logits[p * V], V));
  EXPECT_GT(worst, 1e-3) << GetParam() << ": official and plain logits agree to " << worst;
}

// The state after the first 37 reference ids (plain numerics): every compressor has finished
// entries and an unfinished window. Computed once per fixture.
const std::string& state_bytes(const std::string& name) {
  static std::map<std::string, std::string> cache;
  auto [it, fresh] = cache.try_emplace(name);
  const Reference& ref = reference(name, Numerics::kPlain);
  if (fresh && ref.model) {
    SequenceState s = ref.model->new_sequence();
    std::vector<float> logits;
    EXPECT_TRUE(ref.model->forward(s, ref.ids.data(), 37, false, &logits).ok());
    it->second = s.serialize();
  }
  return it->second;
}

void put_u64(std::string& bytes, size_t offset, uint64_t v) { std::memcpy(&bytes[offset], &v, 8); }
uint64_t get_u64(const std::string& bytes, size_t offset) {
  uint64_t v;
  std::memcpy(&v, &bytes[offset], 8);
  return v;
}

TEST_P(PerFixture, DeserializeRejectsTruncatedOrPaddedBytes) {
  const CpuModel* model = reference(GetParam(), Numerics::kPlain).model.get();
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string& bytes = state_bytes(GetParam());
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
  const CpuModel* model = reference(GetParam(), Numerics::kPlain).model.get();
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string& bytes = state_bytes(GetParam());
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
  const Config& mixed = reference("mixed_selective", Numerics::kPlain).model->config();
  const Config& sliding = reference("sliding_hash", Numerics::kPlain).model->config();
  const Config& hca = reference("hca_clamp", Numerics::kPlain).model->config();
  const std::string& m = state_bytes("mixed_selective");
  EXPECT_FALSE(SequenceState::deserialize(m, sliding).ok());
  EXPECT_FALSE(SequenceState::deserialize(m, hca).ok());
  EXPECT_FALSE(SequenceState::deserialize(state_bytes("sliding_hash"), mixed).ok());
  EXPECT_FALSE(SequenceState::deserialize(state_bytes("hca_clamp"), mixed).ok());
  EXPECT_FALSE(SequenceState::deserialize(std::string(), mixed).ok());
}

// Random byte flips anywhere: deserialize either refuses or yields a state the model can run on
// without crashing (under ASan this catches out-of-bounds reads of a corrupt state).
TEST_P(PerFixture, RandomByteFlipsNeverCrash) {
  const CpuModel* model = reference(GetParam(), Numerics::kPlain).model.get();
  ASSERT_TRUE(model);
  const Config& c = model->config();
  const std::string& bytes = state_bytes(GetParam());
  std::mt19937 rng(2024);
  const int32_t next[2] = {5, 6};
  int accepted = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::string b = bytes;
    // Half the flips hit the first 256 bytes, where the structural fields are dense.
    const size_t at = trial % 2 ? rng() % std::min<size_t>(256, b.size()) : rng() % b.size();
    b[at] = static_cast<char>(b[at] ^ (1u << (rng() % 8)));
    auto r = SequenceState::deserialize(b, c);
    if (!r.ok()) continue;
    ++accepted;
    std::vector<float> logits;
    Status st = model->forward(*r, next, 2, true, &logits);
    (void)st;  // a float payload flip may give any values; it must just not crash
  }
  RecordProperty("accepted", accepted);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PerFixture, ::testing::ValuesIn(kFixtures));

}  // namespace
}  // namespace deepinfer::v4
