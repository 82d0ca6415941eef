// Engram preprocessing against transformers' deepseek_v41 (golden_v41/v41_engram_ratio1): the
// whole token map, the derived constants and both rows' hash ids; plus normalization cases whose
// answers follow from the Unicode standard.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/loader/safetensors_file.h"
#include "deepinfer/model/deepseek_v41/engram_hash.h"
#include "deepinfer/model/deepseek_v41/engram_numpy_rng.h"
#include "deepinfer/model/deepseek_v41/engram_token_map.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::v41 {
namespace {

using nlohmann::json;

const std::string kFixture = std::string(DEEPINFER_SHARED_DIR) + "/golden_v41/v41_engram_ratio1";

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

std::vector<int64_t> read_i64(const SafetensorsFile& file, const std::string& name,
                              std::vector<int64_t>* shape) {
  const TensorInfo* t = file.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  EXPECT_EQ(t->dtype, DType::kI64) << name;
  *shape = t->shape;
  std::vector<int64_t> v(t->numel());
  std::memcpy(v.data(), t->data, v.size() * sizeof(int64_t));
  return v;
}

std::string normalized(std::string_view s) {
  auto r = engram_normalize(s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

TEST(EngramNormalize, FullwidthFoldsToAsciiUnderNfkc) {
  EXPECT_EQ(normalized("\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\x91"), "ab1");  // ＡＢ１
  EXPECT_EQ(normalized("\xEF\xAC\x81"), "fi");                           // ﬁ ligature
}

TEST(EngramNormalize, AccentsAreStrippedAfterDecomposition) {
  EXPECT_EQ(normalized("Caf\xC3\xA9"), "cafe");                 // Café (precomposed é)
  EXPECT_EQ(normalized("Cafe\xCC\x81"), "cafe");                // e + U+0301
  EXPECT_EQ(normalized("\xC3\x85ngstr\xC3\xB6m"), "angstrom");  // Ångström
  EXPECT_EQ(normalized("\xE2\x84\xAB"), "a");                   // U+212B ANGSTROM SIGN
}

TEST(EngramNormalize, CaseIsFoldedPerCodePoint) {
  EXPECT_EQ(normalized("ThE"), "the");
  EXPECT_EQ(normalized("\xCE\xA3\xCE\xA3"), "\xCF\x83\xCF\x83");  // ΣΣ -> σσ (no final sigma)
  EXPECT_EQ(normalized("\xC4\xB0"), "i");  // İ: NFD gives I + U+0307 (Mn, stripped)
}

TEST(EngramNormalize, WhitespaceCollapsesAndStrips) {
  EXPECT_EQ(normalized(" The"), "the");
  EXPECT_EQ(normalized("a \t\r\n b"), "a b");
  EXPECT_EQ(normalized("\n\n"), " ");  // collapses to a lone space, which survives
  EXPECT_EQ(normalized(" "), " ");
  EXPECT_EQ(normalized("  x  "), "x");
  EXPECT_EQ(normalized("\xE3\x80\x80x"), "x");  // U+3000 -> U+0020 under NFKC, then stripped
  EXPECT_EQ(normalized("\xC2\xA0"), " ");       // NBSP is " " under NFKC: a lone space survives
}

TEST(EngramNumpyRng, MultipliersMatchTheFixture) {
  const json engram = read_json(kFixture + "/expected.json")["engram"];
  const json config = read_json(kFixture + "/config.json")["text_config"];
  const int64_t vocab = engram["compressed_vocab_size"];
  const int64_t bound = (INT64_MAX / vocab) / 2;
  const auto layer_ids = config["engram_layer_ids"].get<std::vector<int>>();
  for (size_t l = 0; l < layer_ids.size(); ++l) {
    NumpyPcg64 g(10007ull * layer_ids[l]);
    auto v = numpy_integers_int64(&g, 0, bound, config["engram_max_ngram_size"]);
    ASSERT_TRUE(v.ok()) << v.status().message();
    for (size_t i = 0; i < v->size(); ++i)
      EXPECT_EQ((*v)[i] * 2 + 1, engram["multipliers"][l][i].get<int64_t>()) << l << "," << i;
  }
}

class EngramFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = read_json(kFixture + "/config.json")["text_config"];
    engram_ = read_json(kFixture + "/expected.json")["engram"];
    auto tok = tokenizer::Tokenizer::from_file(kFixture + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    auto map = build_engram_token_map(**tok);
    ASSERT_TRUE(map.ok()) << map.status().message();
    map_ = std::move(*map);
    auto file = SafetensorsFile::open(kFixture + "/expected.safetensors");
    ASSERT_TRUE(file.ok()) << file.status().message();
    expected_ = std::move(*file);
  }

  EngramHashParams params() const {
    EngramHashParams p;
    p.layer_ids = config_["engram_layer_ids"].get<std::vector<int32_t>>();
    p.max_ngram_size = config_["engram_max_ngram_size"];
    p.n_heads = config_["engram_n_heads"];
    p.vocab_size = config_["engram_vocab_size"];
    p.compressed_vocab_size = config_["engram_compressed_vocab_size"];
    p.pad_id = map_.compressed.at(config_["engram_pad_id"].get<size_t>());
    p.num_embeddings = config_["engram_num_embeddings"].get<std::vector<int64_t>>();
    return p;
  }

  json config_, engram_;
  EngramTokenMap map_;
  std::unique_ptr<SafetensorsFile> expected_;
};

TEST_F(EngramFixture, TokenMapEqualsTransformersOverTheWholeVocabulary) {
  std::vector<int64_t> shape;
  const std::vector<int64_t> want = read_i64(*expected_, "engram_token_map", &shape);
  ASSERT_EQ(shape, std::vector<int64_t>{static_cast<int64_t>(map_.compressed.size())});
  EXPECT_EQ(map_.compressed, want);
  EXPECT_EQ(map_.compressed_vocab_size, config_["engram_compressed_vocab_size"].get<int64_t>());
  EXPECT_EQ(map_.compressed_vocab_size, engram_["compressed_vocab_size"].get<int64_t>());
}

TEST_F(EngramFixture, PrimesOffsetsAndMultipliersEqualTheFixture) {
  auto hasher = EngramHasher::create(params());
  ASSERT_TRUE(hasher.ok()) << hasher.status().message();
  EXPECT_EQ(params().pad_id, engram_["pad_id_compressed"].get<int64_t>());
  const int heads = config_["engram_n_heads"];
  for (int l = 0; l < hasher->n_layers(); ++l) {
    for (int c = 0; c < hasher->n_cols(); ++c) {
      EXPECT_EQ(hasher->prime(l, c), engram_["primes"][l][c / heads][c % heads].get<int64_t>());
      EXPECT_EQ(hasher->offset(l, c), engram_["offsets"][l][c].get<int64_t>());
    }
    for (int i = 0; i < config_["engram_max_ngram_size"].get<int>(); ++i)
      EXPECT_EQ(hasher->multiplier(l, i), engram_["multipliers"][l][i].get<int64_t>());
  }
}

TEST_F(EngramFixture, HashIdsOfBothRowsEqualTransformers) {
  auto hasher = EngramHasher::create(params());
  ASSERT_TRUE(hasher.ok()) << hasher.status().message();
  for (int b = 0; b < 2; ++b) {
    std::vector<int64_t> ids_shape, want_shape;
    const auto all_ids = read_i64(*expected_, "input_ids", &ids_shape);
    ASSERT_EQ(ids_shape.size(), 2u);
    const std::vector<int64_t> input_ids(all_ids.begin() + b * ids_shape[1],
                                         all_ids.begin() + (b + 1) * ids_shape[1]);
    const auto want = read_i64(*expected_, "engram_hash_ids_" + std::to_string(b), &want_shape);
    ASSERT_EQ(want_shape, (std::vector<int64_t>{static_cast<int64_t>(input_ids.size()),
                                                hasher->n_layers(), hasher->n_cols()}));
    std::vector<int64_t> history;
    for (int64_t id : input_ids) history.push_back(map_.compressed.at(id));
    std::vector<int64_t> got(want.size());
    hasher->hash(history, 0, static_cast<int64_t>(history.size()), got);
    EXPECT_EQ(got, want) << "row " << b;

    // Prefill then one position at a time over the same history gives the same rows.
    const int64_t split = 41, row = hasher->n_layers() * hasher->n_cols();
    std::vector<int64_t> pieces(want.size());
    hasher->hash(history, 0, split, std::span(pieces).first(split * row));
    for (int64_t p = split; p < static_cast<int64_t>(history.size()); ++p)
      hasher->hash(history, p, p + 1, std::span(pieces).subspan(p * row, row));
    EXPECT_EQ(pieces, want) << "row " << b;
  }
}

TEST(EngramHash, DeadPositionsCutTheLookBack) {
  EngramHashParams p;
  p.layer_ids = {1};
  p.max_ngram_size = 3;
  p.n_heads = 1;
  p.vocab_size = 37;
  p.compressed_vocab_size = 10;
  p.pad_id = 2;
  auto h = EngramHasher::create(p);
  ASSERT_TRUE(h.ok()) << h.status().message();
  // Position 2 behind a dead position 1 hashes like position 0 of a fresh sequence (all pad
  // look-back) but with its own id.
  const std::vector<int64_t> cut = {5, EngramHasher::kDead, 7};
  const std::vector<int64_t> fresh = {7};
  std::vector<int64_t> a(2), b(2);
  h->hash(cut, 2, 3, a);
  h->hash(fresh, 0, 1, b);
  EXPECT_EQ(a, b);
}

TEST(EngramHash, BadConfigNamesTheField) {
  EngramHashParams p;
  p.layer_ids = {1};
  p.max_ngram_size = 3;
  p.n_heads = 2;
  p.vocab_size = 37;
  p.compressed_vocab_size = 238;
  p.pad_id = 2;
  p.num_embeddings = {169};
  auto h = EngramHasher::create(p);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("engram_num_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::v41
