// The DSpark drafter (dspark.h) on the v41-dspark tiny preset: its manifest is exactly the written
// checkpoint's draft tensors, a missing draft tensor is named, a checkpoint without any loads the
// target alone; the target's taps change no logit; the drafts are deterministic and bitwise the
// same however the context was chunked (through the target and through absorb); only the last
// sliding_window context rows matter; shapes and ranges; the Markov chain and confidence head
// against values worked by hand. There are no reference logits for DSpark.
#include "deepinfer/model/deepseek_v41/dspark.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/weights.h"

namespace deepinfer::v41 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string& dspark_dir(bool quantized = false) {
  return tiny_model_dir_for_test(quantized, "v41-dspark");
}

std::unique_ptr<CpuModel> load_model(const std::string& dir) {
  auto m = CpuModel::load(dir);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(pick(rng));
  return ids;
}

// A copy of `src` without the tensors named (canonical): their shards rewritten from the raw
// header, the index's entries dropped.
void copy_without(const std::string& src, const std::set<std::string>& drop,
                  const std::string& dst) {
  auto ckpt = Checkpoint::open(src);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  std::set<std::string> files, on_disk;
  for (const std::string& n : drop) {
    const TensorInfo* t = (*ckpt)->find(n);
    ASSERT_NE(t, nullptr) << n;
    files.insert(fs::path(t->file).filename().string());
    on_disk.insert(t->name);
  }
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    if (name == "model.safetensors.index.json") {
      std::ifstream f(e.path());
      json index = json::parse(f);
      for (const std::string& n : on_disk) index["weight_map"].erase(n);
      std::ofstream(dst + "/" + name) << index.dump(2);
    } else if (files.count(name)) {
      const std::string bytes = read_file_bytes(e.path().string());
      uint64_t hn = 0;
      for (int i = 0; i < 8; ++i) hn |= uint64_t(uint8_t(bytes[i])) << (8 * i);
      const json h = json::parse(bytes.substr(8, hn));
      SafetensorsWriter w;
      for (const auto& [tn, v] : h.items()) {
        if (tn == "__metadata__" || on_disk.count(tn)) continue;
        auto dt = parse_dtype(v["dtype"].get<std::string>());
        ASSERT_TRUE(dt.ok());
        const size_t b = v["data_offsets"][0], en = v["data_offsets"][1];
        const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data()) + 8 + hn;
        w.add(
            {tn, *dt, v["shape"].get<std::vector<int64_t>>(), std::vector<uint8_t>(p + b, p + en)});
      }
      ASSERT_TRUE(w.write(dst + "/" + name).ok());
    } else {
      fs::copy(e.path(), dst + "/" + name);
    }
  }
}

TEST(V41Dspark, ManifestIsExactlyTheTinyCheckpointsTensors) {
  for (bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "quantized" : "plain");
    const std::string& dir = dspark_dir(quantized);
    auto c = load_config(dir);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->num_nextn_layers, 3);
    auto ckpt = Checkpoint::open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    EXPECT_TRUE(has_draft_weights(**ckpt));

    std::set<std::string> manifest;
    for (const WeightSpec& s : weight_manifest(*c, true)) {
      EXPECT_TRUE(manifest.insert(s.name).second) << "duplicate " << s.name;
      if (s.kind == WeightKind::kEngramTable)
        manifest.insert(s.name.substr(0, s.name.size() - 7) + ".scale");
    }
    std::set<std::string> in_file;
    for (const std::string& n : (*ckpt)->canonical_names())
      if (!n.ends_with(".scale") || n.ends_with("engram.embed.scale")) in_file.insert(n);
    EXPECT_EQ(manifest, in_file);

    // Every draft tensor exists in its logical shape (packed FP4 experts halve the columns).
    const std::vector<WeightSpec> draft = dspark_weight_manifest(*c);
    EXPECT_FALSE(draft.empty());
    for (const WeightSpec& s : draft) {
      EXPECT_EQ(s.name.rfind("mtp.", 0), 0u) << s.name;
      const TensorInfo* t = (*ckpt)->find(s.name);
      ASSERT_NE(t, nullptr) << s.name;
      std::vector<int64_t> want = s.shape;
      if (t->dtype == DType::kI8 || t->dtype == DType::kU8) want[1] /= 2;
      EXPECT_EQ(t->shape, want) << s.name;
    }
    auto m = load_model(dir);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->has_draft_weights());
    EXPECT_TRUE(m->weights().has("mtp.2.confidence_head.proj.weight"));
  }
}

TEST(V41Dspark, MissingDraftTensorIsNamedWithItsCheckpoint) {
  for (const std::string name : {"mtp.2.confidence_head.proj.weight", "mtp.0.main_proj.weight",
                                 "mtp.1.ffn.experts.3.w2.weight", "mtp.0.attn.wkv.weight",
                                 "mtp.2.markov_head.embed.weight"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    copy_without(dspark_dir(), {name}, tmp.path());
    auto m = CpuModel::load(tmp.path());
    ASSERT_FALSE(m.ok());
    const std::string err = m.status().to_string();
    EXPECT_NE(err.find("missing tensor '" + name + "'"), std::string::npos) << err;
    EXPECT_NE(err.find(tmp.path()), std::string::npos) << err;
  }
}

// transformers' save_pretrained writes no draft tensor: such a checkpoint loads the target, and
// only asking for the drafter fails.
TEST(V41Dspark, CheckpointWithoutDraftTensorsLoadsTheTargetAlone) {
  auto c = load_config(dspark_dir());
  ASSERT_TRUE(c.ok());
  std::set<std::string> draft;
  for (const WeightSpec& s : dspark_weight_manifest(*c)) draft.insert(s.name);
  TempDir tmp;
  copy_without(dspark_dir(), draft, tmp.path());
  auto m = load_model(tmp.path());
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->has_draft_weights());
  auto d = DsparkDrafter::create(*m);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().to_string().find("mtp."), std::string::npos) << d.status().to_string();
}

TEST(V41Dspark, TapsChangeNoLogitAndHaveTheirShape) {
  auto m = load_model(dspark_dir());
  ASSERT_NE(m, nullptr);
  const Config& c = m->config();
  const std::vector<int32_t> ids = random_ids(23, c.vocab_size, 5);
  auto s1 = m->new_sequence(), s2 = m->new_sequence();
  std::vector<float> a, b, taps;
  ASSERT_TRUE(m->forward(s1, ids.data(), 23, true, &a).ok());
  ASSERT_TRUE(m->forward(s2, ids.data(), 23, true, &b, 0, &taps).ok());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  ASSERT_EQ(taps.size(), size_t(23) * 3 * c.hidden_size);
  for (float v : taps) ASSERT_TRUE(std::isfinite(v));
}

struct DraftRun {
  DsparkProposal proposal;
  int64_t absorbed = 0;
};

// The target over ids in `target_chunks` (taps collected), the drafter absorbing those taps in
// `absorb_chunks`, then one proposal after `anchor`.
DraftRun draft(const CpuModel& m, const DsparkDrafter& d, const std::vector<int32_t>& ids,
               const std::vector<int64_t>& target_chunks, const std::vector<int64_t>& absorb_chunks,
               int32_t anchor) {
  auto st = m.new_sequence();
  std::vector<float> all_taps, taps, logits;
  int64_t at = 0;
  for (int64_t n : target_chunks) {
    EXPECT_TRUE(m.forward(st, ids.data() + at, n, false, &logits, 0, &taps).ok());
    all_taps.insert(all_taps.end(), taps.begin(), taps.end());
    at += n;
  }
  EXPECT_EQ(at, static_cast<int64_t>(ids.size()));
  DsparkState ds = d.new_state();
  at = 0;
  for (int64_t n : absorb_chunks) {
    EXPECT_TRUE(d.absorb(ds, all_taps.data() + at * d.tap_width(), n).ok());
    at += n;
  }
  DraftRun r;
  r.absorbed = ds.num_tokens;
  EXPECT_TRUE(d.propose(ds, anchor, &r.proposal).ok());
  return r;
}

void expect_bitwise_equal(const DsparkProposal& a, const DsparkProposal& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.confidence.size(), b.confidence.size());
  EXPECT_EQ(std::memcmp(a.confidence.data(), b.confidence.data(), a.confidence.size() * 4), 0);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4), 0);
}

TEST(V41Dspark, DraftsAreDeterministicAndIndependentOfChunking) {
  auto m = load_model(dspark_dir());
  ASSERT_NE(m, nullptr);
  auto d = DsparkDrafter::create(*m);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  // 41 context tokens: more than the sliding window (16), so the rings wrap.
  const std::vector<int32_t> ids = random_ids(41, m->config().vocab_size, 11);
  const int32_t anchor = 1234;
  const DraftRun one = draft(*m, **d, ids, {41}, {41}, anchor);
  EXPECT_EQ(one.absorbed, 41);
  expect_bitwise_equal(one.proposal, draft(*m, **d, ids, {41}, {41}, anchor).proposal);
  expect_bitwise_equal(one.proposal, draft(*m, **d, ids, {1, 7, 13, 20}, {41}, anchor).proposal);
  expect_bitwise_equal(one.proposal, draft(*m, **d, ids, {41}, {3, 1, 16, 21}, anchor).proposal);
  std::vector<int64_t> ones(41, 1);
  expect_bitwise_equal(one.proposal, draft(*m, **d, ids, ones, ones, anchor).proposal);
  // The anchor matters.
  const DraftRun other = draft(*m, **d, ids, {41}, {41}, anchor + 1);
  EXPECT_NE(std::memcmp(one.proposal.logits.data(), other.proposal.logits.data(),
                        one.proposal.logits.size() * 4),
            0);
}

// Block rows see their stage's window: the last sliding_window absorbed rows, nothing older.
TEST(V41Dspark, OnlyTheLastWindowOfContextRowsMatters) {
  auto m = load_model(dspark_dir());
  ASSERT_NE(m, nullptr);
  auto d = DsparkDrafter::create(*m);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  const Config& c = m->config();
  const int64_t n = 30, W = c.sliding_window;
  const std::vector<int32_t> ids = random_ids(n, c.vocab_size, 3);
  auto st = m->new_sequence();
  std::vector<float> logits, taps;
  ASSERT_TRUE(m->forward(st, ids.data(), n, false, &logits, 0, &taps).ok());
  std::vector<float> old_changed = taps, recent_changed = taps;
  const int64_t width = (*d)->tap_width();
  for (int64_t i = 0; i < (n - W) * width; ++i) old_changed[i] = -old_changed[i] + 0.5f;
  for (int64_t i = (n - 1) * width; i < n * width; ++i)
    recent_changed[i] = -recent_changed[i] + 0.5f;  // not a scale: main_norm undoes those
  auto propose = [&](const std::vector<float>& t) {
    DsparkState s = (*d)->new_state();
    EXPECT_TRUE((*d)->absorb(s, t.data(), n).ok());
    DsparkProposal p;
    EXPECT_TRUE((*d)->propose(s, 77, &p).ok());
    return p;
  };
  const DsparkProposal base = propose(taps);
  expect_bitwise_equal(base, propose(old_changed));
  const DsparkProposal recent = propose(recent_changed);
  EXPECT_NE(std::memcmp(base.logits.data(), recent.logits.data(), base.logits.size() * 4), 0);
}

TEST(V41Dspark, ShapesRangesAndErrors) {
  for (bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "quantized" : "plain");
    auto m = load_model(dspark_dir(quantized));
    ASSERT_NE(m, nullptr);
    auto d = DsparkDrafter::create(*m);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const Config& c = m->config();
    const int bs = (*d)->block_size();
    EXPECT_EQ(bs, 5);
    const std::vector<int32_t> ids = random_ids(19, c.vocab_size, 2);
    for (int64_t context : {int64_t(0), int64_t(19)}) {
      DsparkState s = (*d)->new_state();
      if (context > 0) {
        auto st = m->new_sequence();
        std::vector<float> logits, taps;
        ASSERT_TRUE(m->forward(st, ids.data(), context, false, &logits, 0, &taps).ok());
        ASSERT_TRUE((*d)->absorb(s, taps.data(), context).ok());
      }
      DsparkProposal p;
      ASSERT_TRUE((*d)->propose(s, ids.back(), &p).ok());
      ASSERT_EQ(p.tokens.size(), size_t(bs));
      ASSERT_EQ(p.confidence.size(), size_t(bs));
      ASSERT_EQ(p.logits.size(), size_t(bs) * c.vocab_size);
      for (int i = 0; i < bs; ++i) {
        EXPECT_GE(p.tokens[i], 0);
        EXPECT_LT(p.tokens[i], c.vocab_size);
        EXPECT_GE(p.confidence[i], 0.0f);
        EXPECT_LE(p.confidence[i], 1.0f);
        const float* row = &p.logits[int64_t(i) * c.vocab_size];
        for (int64_t v = 0; v < c.vocab_size; ++v) {
          ASSERT_TRUE(std::isfinite(row[v]));
          ASSERT_LE(row[v], row[p.tokens[i]]);  // the greedy pick is a maximum
        }
      }
    }
    DsparkState s = (*d)->new_state();
    DsparkProposal p;
    const Status bad_anchor = (*d)->propose(s, static_cast<int32_t>(c.vocab_size), &p);
    EXPECT_FALSE(bad_anchor.ok());
    EXPECT_NE(bad_anchor.to_string().find("anchor"), std::string::npos);
    EXPECT_FALSE((*d)->absorb(s, nullptr, 0).ok());
    DsparkState foreign;
    EXPECT_FALSE((*d)->propose(foreign, 5, &p).ok());
  }
}

// Hand-worked: hidden 2, vocab 3, rank 2, two rows, anchor 2.
//   norm = (1, 1), head rows (1, 0), (0, 1), (0.5, 0.5);
//   x0 = (1, -1): rms 1, normed (1, -1), head logits (1, -1, 0);
//   x1 = (2, 2): rms 2, normed (1, 1), head logits (1, 1, 1).
//   markov_embed rows e0 = (0, 0), e1 = (1, 0), e2 = (0, 2); markov_head rows (0, -1), (1, 1),
//   (2, 0.25).
//   Row 0, prev = anchor 2: bias = (-2, 2, 0.5), logits (-1, 1, 0.5) -> token 1 (0 without the
//   bias).
//   Row 1, prev = 1 (the token just drafted): bias = (0, 1, 2), logits (1, 2, 3) -> token 2 (with
//   the anchor as prev it would be (-1, 3, 1.5) -> 1).
//   confidence_proj = (0.5, 0.25, 1, -1) on the un-normed row and the prev embedding:
//   row 0: 0.5 - 0.25 + 0 - 2 = -1.75 -> sigmoid 1 / (1 + e^1.75) = 0.1480472;
//   row 1: 1 + 0.5 + 1 - 0 = 2.5 -> sigmoid 1 / (1 + e^-2.5) = 0.9241418.
TEST(V41Dspark, MarkovChainAndConfidenceByHand) {
  const float norm[] = {1, 1};
  const float head[] = {1, 0, 0, 1, 0.5f, 0.5f};
  const float embed[] = {0, 0, 1, 0, 0, 2};
  const float markov[] = {0, -1, 1, 1, 2, 0.25f};
  const float proj[] = {0.5f, 0.25f, 1, -1};
  const float x[] = {1, -1, 2, 2};
  DsparkHeadWeights w;
  w.norm = norm;
  w.head = head;
  w.markov_embed = embed;
  w.markov_head = markov;
  w.confidence_proj = proj;
  w.hidden = 2;
  w.vocab = 3;
  w.rank = 2;
  w.eps = 0.0f;
  DsparkProposal p;
  dspark_draft_tokens(w, x, 2, /*anchor=*/2, &p);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 2}));
  const std::vector<float> want_logits = {-1, 1, 0.5f, 1, 2, 3};
  ASSERT_EQ(p.logits.size(), want_logits.size());
  for (size_t i = 0; i < want_logits.size(); ++i) EXPECT_FLOAT_EQ(p.logits[i], want_logits[i]);
  ASSERT_EQ(p.confidence.size(), 2u);
  EXPECT_NEAR(p.confidence[0], 0.1480472f, 1e-6f);
  EXPECT_NEAR(p.confidence[1], 0.9241418f, 1e-6f);
}

// Ties go to the lower id, as every other top-k of this forward.
TEST(V41Dspark, GreedyTiesGoToTheLowerId) {
  const float norm[] = {1, 1};
  const float head[] = {0, 1, 1, 0, 1, 0};  // normed (1, 1): logits (1, 1, 1)
  const float zeros[] = {0, 0, 0, 0, 0, 0};
  const float proj[] = {0, 0, 0, 0};  // confidence sigmoid(0) = 0.5
  const float x[] = {3, 3};
  DsparkHeadWeights w{norm, head, zeros, zeros, proj, 2, 3, 2, 0.0f};
  DsparkProposal p;
  dspark_draft_tokens(w, x, 1, 0, &p);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{0}));
  EXPECT_FLOAT_EQ(p.confidence[0], 0.5f);
}

// YOCO compact truncation trims the layers after the last one with cached state (yoco_rows.h);
// with layer 4 the last index source, layers 5 and 6 trail and both are tap layers. The drafter
// absorbs every committed position's taps, so a forward asked for taps trims nothing they read:
// under truncation, whole or in chunks shorter than the window, every tap row is the full run's,
// bit for bit.
TEST(V41Dspark, YocoTruncationLeavesTheTapsExact) {
  std::ifstream in(dspark_dir(true) + "/config.json");
  json cfg = json::parse(in);
  json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text["index_source_layer_ids"] = {2, 4};
  TempDir tmp;
  const std::string config_path = tmp.path() + "/trailing.config.json";
  std::ofstream(config_path) << cfg.dump(2);
  v4::TinyModelOptions o;
  o.config_path = config_path;
  o.quantized = true;
  o.tokenizer_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
  const std::string dir = tmp.path() + "/model";
  ASSERT_TRUE(v41::write_tiny_model(dir, o).ok());
  auto m = load_model(dir);
  ASSERT_NE(m, nullptr);
  const Config& c = m->config();
  const int64_t n = 40;
  const std::vector<int32_t> ids = random_ids(n, c.vocab_size, 12);
  std::vector<float> logits, full, taps;
  auto s0 = m->new_sequence();
  ASSERT_TRUE(m->forward(s0, ids.data(), n, false, &logits, 0, &full).ok());
  // {chunk, keep_from_pos}: only the last logits wanted, whole and in chunks of 15; none wanted.
  for (auto [chunk, keep] : {std::pair<int64_t, int64_t>{15, n - 1}, {n, n - 1}, {n, n}}) {
    auto st = m->new_sequence();
    std::vector<float> all;
    for (int64_t pos = 0; pos < n; pos += chunk) {
      const int64_t k = std::min<int64_t>(chunk, n - pos);
      ASSERT_TRUE(m->forward(st, ids.data() + pos, k, false, &logits, keep, &taps).ok());
      all.insert(all.end(), taps.begin(), taps.end());
    }
    ASSERT_EQ(all.size(), full.size());
    EXPECT_EQ(std::memcmp(all.data(), full.data(), full.size() * sizeof(float)), 0)
        << "chunk " << chunk << ", keep " << keep;
  }
}

}  // namespace
}  // namespace deepinfer::v41
