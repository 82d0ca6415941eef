// End-to-end conformance of the GPU forward (runtime/cuda/forward) against the CPU reference
// model in plain numerics, on every golden fixture and on a bf16 re-write of each. The expected
// values always come from CpuModel (itself checked against transformers in
// tests/integration/model_golden_test.cc), never from the GPU code.
//
// Discrete choices (MoE routing, the indexer's top-k) can flip where the CPU's candidates are
// within bf16 rounding of each other; the GPU then legitimately leaves the CPU's path. So every
// run records the GPU's choices, and the first one that differs from the CPU's must be such a
// near-tie (a flip with a clear gap fails as a bug). Logits rows before it are held to the
// tolerance; rows from it on are printed, not asserted.
#include "deepinfer/runtime/cuda/forward/cuda_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cpu_decisions.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/state_layout.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"
#include "golden_fixture.h"
#include "logits_tolerance.h"

namespace deepinfer::cuda {
namespace {

namespace fs = std::filesystem;

constexpr int kGenerate = 64;
constexpr int kMinAgree = 32;

// Max over rows; the worst row's index goes to *worst.
// Over rows [begin, end).
double max_row_err(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab,
                   int64_t begin, int64_t end, int64_t* worst) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double mx = 0;
  *worst = begin;
  for (int64_t r = begin; r < end; ++r) {
    const double e = row_rel_l2(&got[r * vocab], &want[r * vocab], vocab);
    if (!(e <= mx)) mx = e, *worst = r;
  }
  return mx;
}

int32_t host_argmax(const float* x, int64_t n) {  // ties to the lower id, as the CUDA op
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

// The fixture's checkpoint re-written through the loader: every float tensor as BF16, the
// tid2eid tables as I32, one model.safetensors next to the same config.json.
std::string write_bf16_copy(const std::string& fixture) {
  const std::string src = testing::golden_dir(fixture);
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_cuda_model_test_bf16_" + fixture);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir / "config.json");
  auto config = v4::load_config(src);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  auto ckpt = Checkpoint::open(src);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  auto weights = v4::load_weights(**ckpt, *config);
  EXPECT_TRUE(weights.ok()) << weights.status().to_string();
  SafetensorsWriter writer;
  for (const v4::WeightSpec& s : v4::weight_manifest(*config)) {
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    std::vector<uint8_t> bytes;
    if (s.kind == v4::WeightKind::kIndex) {
      const int32_t* p = weights->i(s.name);
      bytes.resize(numel * 4);
      std::memcpy(bytes.data(), p, bytes.size());
      writer.add(s.name, DType::kI32, s.shape, std::move(bytes));
    } else {
      const float* p = weights->f(s.name);
      bytes.resize(numel * 2);
      for (int64_t k = 0; k < numel; ++k) {
        const uint16_t b = float_to_bf16(p[k]);
        std::memcpy(&bytes[2 * k], &b, 2);
      }
      writer.add(s.name, DType::kBF16, s.shape, std::move(bytes));
    }
  }
  const Status st = writer.write((dir / "model.safetensors").string());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dir.string();
}

// A quantized tiny model (FP8 attention, MXFP4 experts): the GPU dequantizes on the device, the
// CPU on the host, from the same stored bytes. Its prompt is random ids (no golden fixture).
std::string write_quantized_model(const std::string& preset) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_cuda_model_test_q_" + preset);
  v4::TinyModelOptions o;
  o.preset = preset;
  o.quantized = true;
  o.seed = 7;
  const Status st = v4::write_tiny_model(dir.string(), o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dir.string();
}

struct Case {
  std::string fixture;  // a golden fixture, or a tiny-model preset when quantized
  bool bf16_copy;
  bool quantized = false;
  std::string label() const {
    return fixture + (quantized ? "/fp8+mxfp4" : bf16_copy ? "/bf16" : "/orig");
  }
};

class CudaModelTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    if (c.quantized) {
      dir_ = write_quantized_model(c.fixture);
    } else {
      fixture_ = testing::load_fixture(c.fixture);
      ASSERT_FALSE(fixture_.ids.empty());
      dir_ = c.bf16_copy ? write_bf16_copy(c.fixture) : testing::golden_dir(c.fixture);
    }
    v4::ModelOptions plain;
    plain.numerics = v4::Numerics::kPlain;
    auto cpu = v4::CpuModel::load(dir_, plain);
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    cpu_ = std::move(*cpu);
    vocab_ = cpu_->config().vocab_size;
    if (c.quantized) {
      fixture_.ids = testing::make_ids(48, vocab_, 11);
      fixture_.prefill_len = 20;
    }
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    auto weights = v4::load_weights(**ckpt, cpu_->config());
    ASSERT_TRUE(weights.ok()) << weights.status().to_string();
    weights_ = std::move(*weights);
    decisions_ = choices::cpu_decisions(cpu_->config(), weights_, fixture_.ids);
  }

  std::unique_ptr<CudaModel> gpu(int64_t max_chunk = 256, int max_sequences = 1,
                                 bool cuda_graphs = true) {
    CudaModelOptions o;
    o.max_chunk = max_chunk;
    o.max_sequences = max_sequences;
    o.cuda_graphs = cuda_graphs;
    auto m = CudaModel::load(dir_, o);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // CPU logits for every position of ids, fed in chunks of the given sizes (the rest: 1 each).
  std::vector<float> cpu_logits(const std::vector<int64_t>& chunks) {
    v4::SequenceState st = cpu_->new_sequence();
    return run_chunks(chunks, [&](const int32_t* ids, int64_t n, std::vector<float>* out) {
      return cpu_->forward(st, ids, n, true, out);
    });
  }
  // Records the GPU's decisions into trace_.
  std::vector<float> gpu_logits(CudaModel& m, const std::vector<int64_t>& chunks) {
    m.reset();
    m.poison_scratch();
    m.set_trace(&trace_);
    std::vector<float> out =
        run_chunks(chunks, [&](const int32_t* ids, int64_t n, std::vector<float>* out) {
          *out = nan_filled(n * vocab_);
          return m.forward(ids, n, true, out);
        });
    m.set_trace(nullptr);
    return out;
  }
  template <typename F>
  std::vector<float> run_chunks(const std::vector<int64_t>& chunks, F fwd) {
    const int64_t L = static_cast<int64_t>(fixture_.ids.size());
    std::vector<float> all, part;
    for (int64_t off = 0, i = 0; off < L; ++i) {
      const int64_t n = std::min(L - off, i < int64_t(chunks.size()) ? chunks[i] : 1);
      const Status st = fwd(&fixture_.ids[off], n, &part);
      EXPECT_TRUE(st.ok()) << st.to_string();
      if (!st.ok()) return {};
      all.insert(all.end(), part.begin(), part.end());
      off += n;
    }
    return all;
  }

  // Rows before the GPU's first differing decision within kRowTol; that decision a near-tie.
  void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                    const char* path) {
    const int64_t L = static_cast<int64_t>(fixture_.ids.size());
    const choices::Flip flip = choices::first_flip(decisions_, trace_);
    const int64_t held = std::min(L, flip.pos);
    int64_t worst = 0, worst_after = 0;
    const double err = max_row_err(got, want, vocab_, 0, held, &worst);
    std::printf("[%s] %s: max relative L2 error per row %.3e (row %lld), rows 0..%lld of %lld\n",
                GetParam().label().c_str(), path, err, static_cast<long long>(worst),
                static_cast<long long>(held - 1), static_cast<long long>(L));
    EXPECT_LE(err, kRowTol) << path << ", worst row " << worst;
    if (flip.found()) {
      const double after = max_row_err(got, want, vocab_, held, L, &worst_after);
      std::printf(
          "[%s] %s: GPU decision differs first at %s; rows %lld.. (not asserted) reach "
          "%.3e\n",
          GetParam().label().c_str(), path, flip.describe().c_str(), static_cast<long long>(held),
          after);
      EXPECT_LT(flip.gap, kNearTie) << "a decision flipped with a clear gap: " << flip.describe();
    }
  }

  testing::GoldenFixture fixture_;
  std::string dir_;
  std::unique_ptr<v4::CpuModel> cpu_;
  v4::Weights weights_;
  std::vector<choices::LayerDecisions> decisions_;
  DecisionTrace trace_;
  int64_t vocab_ = 0;
};

TEST_P(CudaModelTest, FullPrefillMatchesCpu) {
  const int64_t L = static_cast<int64_t>(fixture_.ids.size());
  const std::vector<float> want = cpu_logits({L});
  auto m = gpu();
  ASSERT_TRUE(m);
  expect_close(gpu_logits(*m, {L}), want, "full prefill");
  // Twice on the same model: reset must leave nothing of the first sequence behind.
  expect_close(gpu_logits(*m, {L}), want, "full prefill after reset");
}

TEST_P(CudaModelTest, PrefillThenDecodeMatchesCpu) {
  const int64_t P = fixture_.prefill_len;
  const std::vector<float> want = cpu_logits({P});  // then one token at a time
  auto m = gpu();
  ASSERT_TRUE(m);
  expect_close(gpu_logits(*m, {P}), want, "prefill + decode");
}

TEST_P(CudaModelTest, UnevenChunksMatchCpu) {
  // Chunks that straddle compressor windows, and a model that splits calls into chunks of 4.
  const std::vector<int64_t> chunks = {3, 5, 1, 7, 2, 9, 4, 6, 11, 8};
  const std::vector<float> want = cpu_logits(chunks);
  auto m = gpu(/*max_chunk=*/4);
  ASSERT_TRUE(m);
  expect_close(gpu_logits(*m, chunks), want, "uneven chunks, max_chunk 4");
}

TEST_P(CudaModelTest, GreedyGenerationAgreesWithCpu) {
  const std::vector<int32_t>& prompt = fixture_.ids;
  std::vector<int32_t> want;
  v4::SequenceState st = cpu_->new_sequence();
  std::vector<float> logits;
  ASSERT_TRUE(cpu_->forward(st, prompt.data(), prompt.size(), false, &logits).ok());
  for (int i = 0; i < kGenerate; ++i) {
    want.push_back(host_argmax(logits.data(), vocab_));
    if (i + 1 < kGenerate) {
      ASSERT_TRUE(cpu_->forward(st, &want.back(), 1, false, &logits).ok());
    }
  }
  auto m = gpu();
  ASSERT_TRUE(m);
  m->poison_scratch();
  auto got = m->generate_greedy(prompt.data(), prompt.size(), kGenerate);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), size_t(kGenerate));
  int agree = 0;
  while (agree < kGenerate && (*got)[agree] == want[agree]) ++agree;
  std::printf("[%s] greedy: %d of %d tokens agree before the first difference\n",
              GetParam().label().c_str(), agree, kGenerate);
  if (agree >= kMinAgree) return;
  // Evidence for an early split: over the CPU's sequence up to the differing pick, the GPU's
  // first differing decision, or the pick itself, must be a near-tie.
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), want.begin(), want.begin() + agree);
  const auto decisions = choices::cpu_decisions(cpu_->config(), weights_, seq);
  v4::SequenceState cs = cpu_->new_sequence();
  std::vector<float> cpu_last;
  ASSERT_TRUE(cpu_->forward(cs, seq.data(), seq.size(), false, &cpu_last).ok());
  m->reset();
  DecisionTrace trace;
  m->set_trace(&trace);
  std::vector<float> gpu_last;
  ASSERT_TRUE(m->forward(seq.data(), seq.size(), false, &gpu_last).ok());
  m->set_trace(nullptr);
  const choices::Flip flip = choices::first_flip(decisions, trace);
  double scale = 0;
  for (float x : cpu_last) scale = std::max(scale, std::fabs(double(x)));
  const double pick_gap = (cpu_last[want[agree]] - cpu_last[(*got)[agree]]) / scale;
  std::printf(
      "[%s] greedy split at token %d (position %zu): GPU decision differs first at %s; "
      "the CPU prefers its pick %d over the GPU's %d by %.3e of the logit scale\n",
      GetParam().label().c_str(), agree, seq.size() - 1, flip.describe().c_str(), want[agree],
      (*got)[agree], pick_gap);
  EXPECT_TRUE((flip.found() && flip.gap < kNearTie) || pick_gap < kNearTie)
      << "greedy split after " << agree << " tokens without a near-tie: " << flip.describe();
}

// Three sequences of different lengths in slots 0..2, then decode steps that run all three
// together (in a shuffled slot order) on the fixture's next ids. A causal model's logits at
// position p depend on ids[0..p] only, so each row must match the CPU's full-prefill row at that
// position; rows from the first near-tie flip of a single-sequence run on are not held (as
// expect_close), since the batch may round such a tie the other way.
TEST_P(CudaModelTest, BatchedDecodeMatchesCpu) {
  const int64_t L = static_cast<int64_t>(fixture_.ids.size());
  const int64_t steps = 6;
  const std::vector<float> want = cpu_logits({L});
  auto m = gpu(256, 4);
  ASSERT_TRUE(m);
  gpu_logits(*m, {L});  // slot 0: the single-sequence decisions, for the flip position
  const int64_t held = std::min(L, choices::first_flip(decisions_, trace_).pos);
  // Every decoded position before `held`, so each row is checked.
  const int64_t top = held - steps;
  ASSERT_GE(top, 3) << "the first near-tie flip comes too early for " << steps << " steps";
  const std::vector<int64_t> lens = {std::max<int64_t>(1, top - 16), std::max<int64_t>(1, top - 8),
                                     top};
  for (int k = 0; k < 3; ++k) {
    m->reset(k);
    ASSERT_TRUE(m->forward(k, fixture_.ids.data(), lens[k], false, nullptr).ok());
  }
  m->poison_scratch();
  const int slots[3] = {2, 0, 1};
  double worst = 0;
  int64_t rows = 0;
  for (int64_t j = 0; j < steps; ++j) {
    int32_t ids[3];
    for (int b = 0; b < 3; ++b) ids[b] = fixture_.ids[lens[slots[b]] + j];
    std::vector<float> got = nan_filled(3 * vocab_);
    std::vector<int32_t> greedy;
    ASSERT_TRUE(m->decode(slots, ids, 3, &got, &greedy).ok());
    ASSERT_EQ(greedy.size(), 3u);
    for (int b = 0; b < 3; ++b) {
      const int64_t pos = lens[slots[b]] + j;
      EXPECT_EQ(m->num_tokens(slots[b]), pos + 1);
      EXPECT_EQ(greedy[b], host_argmax(&got[b * vocab_], vocab_)) << "step " << j << " row " << b;
      if (pos >= held) continue;
      const double e = row_rel_l2(&got[b * vocab_], &want[pos * vocab_], vocab_);
      worst = std::max(worst, e);
      ++rows;
      EXPECT_LE(e, kRowTol) << "step " << j << ", slot " << slots[b] << ", position " << pos;
    }
  }
  std::printf("[%s] batched decode: %lld rows held, max relative L2 error %.3e\n",
              GetParam().label().c_str(), static_cast<long long>(rows), worst);
  EXPECT_GT(rows, 0);
  // Three rows run at bucket 4 (one padding row); after the eager and the capturing step, the
  // rest were replayed from the graph, so the rows above checked the replayed path too.
  EXPECT_EQ(m->decode_bucket(3), 4);
  const DecodeStepCounts n = m->decode_steps();
  EXPECT_EQ(n.eager, 1);
  EXPECT_EQ(n.captured, 1);
  EXPECT_EQ(n.replayed, steps - 2);
  // Misuse is refused, naming the problem.
  const int twice[2] = {1, 1};
  const int32_t two[2] = {fixture_.ids[0], fixture_.ids[1]};
  const Status dup = m->decode(twice, two, 2, nullptr, nullptr);
  EXPECT_NE(dup.to_string().find("twice"), std::string::npos) << dup.to_string();
  const int outside[1] = {4};
  const Status out = m->decode(outside, two, 1, nullptr, nullptr);
  EXPECT_NE(out.to_string().find("max_sequences"), std::string::npos) << out.to_string();
}

// copy_sequence: a copied slot continues exactly as its source does.
// A step replayed from its CUDA graph makes the same launches as the eager step, so its logits
// are bit-identical to a model that runs every step eagerly. The batch shrinks from three rows
// (bucket 4) to one midway, so two buckets are captured and replayed. The eager model runs all
// its steps first: its scratch growth would otherwise drop the graphed model's graphs (the
// regrowth count is process-wide) and move the step counts asserted below.
TEST_P(CudaModelTest, GraphReplayEqualsEagerDecode) {
  const int64_t L = static_cast<int64_t>(fixture_.ids.size());
  const int64_t steps = 8;
  const int slots[3] = {2, 0, 1};
  struct Step {
    std::vector<float> logits;
    std::vector<int32_t> greedy;
  };
  auto run = [&](CudaModel& m) {
    std::vector<int64_t> pos = {std::max<int64_t>(1, L / 4), std::max<int64_t>(1, L / 3),
                                std::max<int64_t>(1, L / 2)};
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(m.forward(k, fixture_.ids.data(), pos[k], false, nullptr).ok());
    std::vector<Step> out(steps);
    for (int64_t j = 0; j < steps; ++j) {
      const int64_t count = j < steps / 2 ? 3 : 1;
      int32_t ids[3];
      for (int b = 0; b < count; ++b) ids[b] = fixture_.ids[pos[slots[b]] % L];
      EXPECT_TRUE(m.decode(slots, ids, count, &out[j].logits, &out[j].greedy).ok());
      for (int b = 0; b < count; ++b) ++pos[slots[b]];
    }
    return out;
  };
  auto graphed = gpu(256, 4, true), eager = gpu(256, 4, false);
  ASSERT_TRUE(graphed && eager);
  const std::vector<Step> e = run(*eager), g = run(*graphed);
  for (int64_t j = 0; j < steps; ++j) {
    const size_t n = size_t((j < steps / 2 ? 3 : 1) * vocab_);
    ASSERT_EQ(g[j].logits.size(), n) << "step " << j;
    ASSERT_EQ(e[j].logits.size(), n) << "step " << j;
    for (float v : g[j].logits) ASSERT_TRUE(std::isfinite(v)) << "step " << j;
    EXPECT_TRUE(std::memcmp(g[j].logits.data(), e[j].logits.data(), n * sizeof(float)) == 0)
        << "step " << j;
    EXPECT_EQ(g[j].greedy, e[j].greedy) << "step " << j;
  }
  const DecodeStepCounts gc = graphed->decode_steps(), ec = eager->decode_steps();
  EXPECT_EQ(gc.eager, 2);  // each bucket's first step
  EXPECT_EQ(gc.captured, 2);
  EXPECT_EQ(gc.replayed, steps - 4);
  EXPECT_EQ(ec.eager, steps);
  EXPECT_EQ(ec.captured + ec.replayed, 0);
}

// bench --phase-times: every phase of the forward is marked, and a timed decode runs eagerly.
TEST_P(CudaModelTest, PhaseTimesNameEveryPhaseAndDecodeEagerly) {
  auto m = gpu(256, 1);
  ASSERT_TRUE(m);
  m->set_phase_timing(true);
  const int64_t P = fixture_.prefill_len;
  ASSERT_TRUE(m->forward(0, fixture_.ids.data(), P, false, nullptr).ok());
  const int slot = 0;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(m->decode(&slot, &fixture_.ids[P + i], 1, nullptr, nullptr).ok());
  const std::map<std::string, double> t = m->take_phase_times_ms();
  for (const char* want :
       {"embedding", "mhc + norms", "attention: projections", "attention: output projection",
        "moe: router", "moe: experts", "head", "sampling"})
    EXPECT_EQ(t.count(want), 1u) << want;
  bool sink = false, csa = false;
  for (const auto& [name, ms] : t) {
    EXPECT_TRUE(std::isfinite(ms) && ms >= 0) << name;
    sink = sink ||
           (name.rfind("attention: ", 0) == 0 && name.find("sink attention") != std::string::npos);
    csa = csa || name.rfind("attention: CSA sink attention", 0) == 0;
  }
  EXPECT_TRUE(sink) << "no sink-attention phase";
  if (csa) {  // a CSA layer also marks its compressors and its indexer
    EXPECT_EQ(t.count("attention: compressors (CSA, HCA)"), 1u);
    EXPECT_EQ(t.count("attention: CSA indexer (scores, top-k)"), 1u);
  }
  EXPECT_EQ(m->decode_steps().eager, 3);
  EXPECT_EQ(m->decode_steps().replayed, 0);
  EXPECT_TRUE(m->take_phase_times_ms().empty());  // taken
}

TEST_P(CudaModelTest, CopiedSequenceContinuesAsItsSource) {
  const int64_t P = fixture_.prefill_len;
  auto m = gpu(256, 2);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->forward(0, fixture_.ids.data(), P, false, nullptr).ok());
  m->reset(1);
  ASSERT_TRUE(m->copy_sequence(0, 1).ok());
  EXPECT_EQ(m->num_tokens(1), P);
  std::vector<float> a, b;
  ASSERT_TRUE(m->forward(0, &fixture_.ids[P], 1, false, &a).ok());
  ASSERT_TRUE(m->forward(1, &fixture_.ids[P], 1, false, &b).ok());
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Golden, CudaModelTest,
                         ::testing::Values(Case{"hca_clamp", false}, Case{"mixed_fullk", false},
                                           Case{"mixed_selective", false},
                                           Case{"selective_noties", false},
                                           Case{"sliding_hash", false}, Case{"hca_clamp", true},
                                           Case{"mixed_fullk", true}, Case{"mixed_selective", true},
                                           Case{"selective_noties", true},
                                           Case{"sliding_hash", true}, Case{"default", false, true},
                                           Case{"csa", false, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.fixture + (i.param.quantized   ? "_fp8_mxfp4"
                                                     : i.param.bf16_copy ? "_bf16"
                                                                         : "_orig");
                         });

TEST(CudaModelOptionsTest, OfficialNumericsIsRefused) {
  CudaModelOptions o;
  o.model.numerics = v4::Numerics::kOfficial;
  auto m = CudaModel::load(testing::golden_dir("mixed_fullk"), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find("official"), std::string::npos) << m.status().to_string();
}

// The paths tests' model: DEEPINFER_PATHS_MODEL (another deepseek_v4 checkpoint), or a quantized
// tiny one written for the test (own_dir set then, to remove), loaded under batch invariance
// with `slots` sequences of up to 256 tokens.
std::unique_ptr<CudaModel> paths_model(uint64_t seed, int slots, std::string* own_dir) {
  std::string dir;
  if (const char* env = std::getenv("DEEPINFER_PATHS_MODEL"); env && *env) {
    dir = env;
  } else {
    v4::TinyModelOptions t;
    t.quantized = true;
    t.seed = seed;
    t.tokenizer_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
    dir = *own_dir = ::testing::TempDir() + "/cuda_paths_" + std::to_string(seed) + "_" +
                     std::to_string(::getpid());
    const Status st = v4::write_tiny_model(dir, t);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  CudaModelOptions o;
  o.max_tokens = 256;
  o.max_sequences = slots;
  o.batch_invariant = true;
  auto loaded = CudaModel::load(dir, o);
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

// Under batch invariance a position's logits have the same bits whichever path runs it: a decode
// step (the batched kernels, decode_compressor, indexer_topk_rows), a one-token forward and the
// first row of a five-token forward (the segment kernels a verification row takes). Each step
// starts the three slots from the same state (copied), so a failure is that step's own
// computation; its decisions (experts, indexer selections) are compared to say which layer
// parted. DEEPINFER_PATHS_MODEL runs it on another deepseek_v4 checkpoint (v4-flash-8layer: its
// speculative rows parted from plain decoding at position 162 where the tiny models hold).
TEST(CudaModelPathsTest, DecodeAndSegmentRowsGiveTheSameBitsUnderBatchInvariance) {
  constexpr int kPromptLen = 150, kSteps = 24, kRow = 5;
  std::string own_dir;
  const std::unique_ptr<CudaModel> model = paths_model(33, 3, &own_dir);
  ASSERT_TRUE(model);
  CudaModel& m = *model;
  const int64_t V = m.vocab_size();
  const std::vector<int32_t> ids = testing::make_ids(kPromptLen + kSteps + kRow, V, 17);
  ASSERT_TRUE(m.forward(0, ids.data(), kPromptLen, false, nullptr).ok());
  int parted = 0;
  for (int step = 0; step < kSteps; ++step) {
    const int64_t pos = kPromptLen + step;
    for (int slot : {1, 2}) {
      m.reset(slot);
      ASSERT_TRUE(m.copy_sequence(0, slot).ok());
    }
    DecisionTrace td, t1, t5;
    std::vector<float> ld, l1, l5;
    const int zero = 0;
    m.set_trace(&td);
    ASSERT_TRUE(m.decode(&zero, &ids[pos], 1, &ld, nullptr).ok());
    m.set_trace(&t1);
    ASSERT_TRUE(m.forward(1, &ids[pos], 1, false, &l1).ok());
    m.set_trace(&t5);
    ASSERT_TRUE(m.forward(2, &ids[pos], kRow, true, &l5).ok());
    m.set_trace(nullptr);
    l5.resize(V);
    const bool one = ld == l1, five = ld == l5;
    if (one && five) continue;
    ++parted;
    // The first layer whose row-0 decisions differ between the decode and the five-token row.
    std::string where = "no decision differs";
    for (size_t l = 0; l < td.experts.size() && l < t5.experts.size(); ++l) {
      const size_t k = td.experts[l].size();  // one row's choices in the decode trace
      if (k && !std::equal(td.experts[l].begin(), td.experts[l].end(), t5.experts[l].begin())) {
        where = "experts first differ at layer " + std::to_string(l);
        break;
      }
    }
    for (size_t l = 0; l < td.selected.size() && l < t5.selected.size(); ++l) {
      const size_t k = td.selected[l].size();
      if (k && !std::equal(td.selected[l].begin(), td.selected[l].end(), t5.selected[l].begin())) {
        where += "; indexer selections first differ at layer " + std::to_string(l);
        break;
      }
    }
    float gap = 0;
    for (int64_t i = 0; i < V; ++i) gap = std::max(gap, std::fabs(ld[i] - l5[i]));
    ADD_FAILURE() << "position " << pos << ": decode vs one-token forward "
                  << (one ? "same" : "differ") << ", vs five-token row "
                  << (five ? "same" : "differ") << " (max |diff| " << gap << "); " << where;
  }
  std::printf("paths: %d of %d positions parted\n", parted, kSteps);
  if (!own_dir.empty()) fs::remove_all(own_dir);
}

// Where a float of read_sequence's bytes (after the token count) lies in the state: which
// layer's ring, compressor buffer or entries.
std::string state_place(const v4::StateLayout& L, int64_t f) {
  const int64_t page = f / L.page_floats(), off = f % L.page_floats();
  std::string where;
  auto in = [&](const v4::RowBuffer& b, const std::string& name, int layer) {
    if (b.rows == 0 || !where.empty()) return;
    const v4::RowPlace at = L.buffer_place(b);
    if (at.page == page && off >= at.offset && off < at.offset + int64_t(b.rows) * b.width)
      where = "layer " + std::to_string(layer) + " " + name + " row " +
              std::to_string((off - at.offset) / b.width);
  };
  for (size_t l = 0; l < L.layers().size(); ++l) {
    const v4::LayerLayout& y = L.layers()[l];
    const int li = static_cast<int>(l);
    if (page < L.constant_pages()) {
      in(y.ring, "ring", li);
      for (auto [cl, tag] : {std::pair{&y.comp, "compressor"}, std::pair{&y.index, "index"}}) {
        in(cl->pending_kv, std::string(tag) + " pending_kv", li);
        in(cl->pending_gate, std::string(tag) + " pending_gate", li);
        in(cl->prev_kv, std::string(tag) + " prev_kv", li);
        in(cl->prev_gate, std::string(tag) + " prev_gate", li);
      }
    } else {
      for (auto [cl, tag] : {std::pair{&y.comp, "entries"}, std::pair{&y.index, "index keys"}}) {
        if (cl->ratio == 0 || !where.empty()) continue;
        const int64_t rel = off - cl->entry_offset;
        if (rel >= 0 && rel < int64_t(cl->slots_per_page) * cl->dim)
          where = "layer " + std::to_string(l) + " " + tag + " (token page " +
                  std::to_string(page - L.constant_pages()) + ", slot " +
                  std::to_string(rel / cl->dim) + ")";
      }
    }
  }
  return where.empty() ? "page " + std::to_string(page) + " offset " + std::to_string(off) : where;
}

// The speculative runner test's failing case at the model level: one copy of a sequence advanced
// by decode steps, another by five-token forwards (a verification row whose drafts are all
// right), must hold the same state bits and give the same logits (under batch invariance).
TEST(CudaModelPathsTest, FiveTokenForwardsLeaveTheStateDecodeStepsLeave) {
  constexpr int kPromptLen = 150, kRows = 4, kRow = 5;
  std::string own_dir;
  const std::unique_ptr<CudaModel> model = paths_model(34, 2, &own_dir);
  ASSERT_TRUE(model);
  CudaModel& m = *model;
  const int64_t V = m.vocab_size();
  // The runner test's ids (runtime/testing/runner_test_steps.h).
  std::vector<int32_t> ids = runtime::testing::random_ids(kPromptLen, 41);
  const std::vector<int32_t> tail = runtime::testing::random_ids(kRows * kRow, 42);
  ids.insert(ids.end(), tail.begin(), tail.end());
  for (int64_t at = 0; at < kPromptLen; at += 64)
    ASSERT_TRUE(
        m.forward(0, &ids[at], std::min<int64_t>(64, kPromptLen - at), false, nullptr).ok());
  m.reset(1);
  ASSERT_TRUE(m.copy_sequence(0, 1).ok());
  const v4::StateLayout layout(m.config(), m.page_tokens());
  std::vector<uint8_t> a(m.sequence_bytes()), b(m.sequence_bytes());
  const int zero = 0;
  for (int row = 0; row < kRows; ++row) {
    const int64_t pos0 = kPromptLen + int64_t(row) * kRow;
    std::vector<float> dec, five, one;
    for (int t = 0; t < kRow; ++t) {
      ASSERT_TRUE(m.decode(&zero, &ids[pos0 + t], 1, &one, nullptr).ok());
      dec.insert(dec.end(), one.begin(), one.end());
    }
    ASSERT_TRUE(m.forward(1, &ids[pos0], kRow, true, &five).ok());
    for (int t = 0; t < kRow; ++t)
      EXPECT_TRUE(std::equal(dec.begin() + t * V, dec.begin() + (t + 1) * V, five.begin() + t * V))
          << "position " << pos0 + t << ": decode steps and five-token forwards give other logits";
    ASSERT_TRUE(m.read_sequence(0, a.data()).ok());
    ASSERT_TRUE(m.read_sequence(1, b.data()).ok());
    const float* fa = reinterpret_cast<const float*>(a.data() + 8);
    const float* fb = reinterpret_cast<const float*>(b.data() + 8);
    const int64_t floats = (m.sequence_bytes() - 8) / 4;
    std::map<std::string, std::pair<int64_t, float>> differ;  // place -> (count, max |diff|)
    for (int64_t f = 0; f < floats; ++f) {
      if (std::memcmp(&fa[f], &fb[f], 4) == 0) continue;
      std::string place = state_place(layout, f);
      const size_t cut = place.find(" row ");
      if (cut != std::string::npos) place = place.substr(0, cut);  // one line per buffer
      auto& d = differ[place];
      ++d.first;
      d.second = std::max(d.second, std::fabs(fa[f] - fb[f]));
    }
    for (const auto& [place, d] : differ)
      ADD_FAILURE() << "after positions " << pos0 << ".." << pos0 + kRow - 1 << ": " << place
                    << ": " << d.first << " floats differ (max |diff| " << d.second << ")";
  }
  if (!own_dir.empty()) fs::remove_all(own_dir);
}

}  // namespace
}  // namespace deepinfer::cuda
