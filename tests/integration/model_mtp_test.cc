// The MTP draft layer (spec §6.10). transformers drops MTP, so there is no golden reference: these
// tests pin its contract (inputs it depends on, path independence, errors), not its values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "golden_fixture.h"

namespace deepinfer::v4 {
namespace {

std::unique_ptr<CpuModel> tiny_with_mtp(Numerics numerics) {
  // ctest runs each test case as its own process, in parallel: one model dir per process.
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/mtp_model_" + std::to_string(::getpid());
    std::atexit([] {
      std::filesystem::remove_all(::testing::TempDir() + "/mtp_model_" +
                                  std::to_string(::getpid()));
    });
    return d;
  }();
  TinyModelOptions o;
  o.quantized = true;
  o.seed = 5;
  EXPECT_TRUE(write_tiny_model(dir, o).ok());
  auto m = CpuModel::load(dir, ModelOptions::with_numerics(numerics));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(ModelMtpTest, DraftIsPathIndependentAndDependsOnItsInputs) {
  for (Numerics num : {Numerics::kPlain, Numerics::kOfficial}) {
    auto m = tiny_with_mtp(num);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->config().num_mtp_layers, 1);
    std::vector<int32_t> ids;
    for (int i = 0; i < 37; ++i) ids.push_back(100 + 37 * i);
    std::vector<float> logits, a, b, c;
    SequenceState one = m->new_sequence(), chunked = m->new_sequence();
    ASSERT_TRUE(m->forward(one, ids.data(), ids.size(), false, &logits).ok());
    for (size_t at = 0; at < ids.size();) {
      size_t n = std::min<size_t>(1 + at % 5, ids.size() - at);
      ASSERT_TRUE(m->forward(chunked, &ids[at], n, false, &logits).ok());
      at += n;
    }
    // Several draft steps (the MTP ring fills up across calls).
    for (int32_t tok : {7, 9, 11, 13}) {
      ASSERT_TRUE(m->mtp_forward(one, tok, &a).ok());
      ASSERT_TRUE(m->mtp_forward(chunked, tok, &b).ok());
      ASSERT_EQ(a.size(), static_cast<size_t>(m->config().vocab_size));
      EXPECT_LE(testing::row_rel_err(a.data(), b.data(), a.size()), 1e-5);
      for (float v : a) ASSERT_TRUE(std::isfinite(v));
    }
    SequenceState other = m->new_sequence();
    ASSERT_TRUE(m->forward(other, ids.data(), ids.size(), false, &logits).ok());
    ASSERT_TRUE(m->mtp_forward(other, 8, &c).ok());  // another drafted-from token
    SequenceState same = m->new_sequence();
    ASSERT_TRUE(m->forward(same, ids.data(), ids.size(), false, &logits).ok());
    ASSERT_TRUE(m->mtp_forward(same, 7, &a).ok());
    EXPECT_GT(testing::row_rel_err(a.data(), c.data(), a.size()), 1e-3);
  }
}

TEST(ModelMtpTest, ErrorsWithoutAnMtpLayerOrInput) {
  auto golden = CpuModel::load(testing::golden_dir("mixed_fullk"),
                               ModelOptions::with_numerics(Numerics::kPlain));
  ASSERT_TRUE(golden.ok());
  SequenceState s = (*golden)->new_sequence();
  std::vector<float> logits;
  EXPECT_EQ((*golden)->mtp_forward(s, 3, &logits).code(), StatusCode::kFailedPrecondition);
  auto m = tiny_with_mtp(Numerics::kPlain);
  SequenceState empty = m->new_sequence();
  EXPECT_EQ(m->mtp_forward(empty, 3, &logits).code(), StatusCode::kFailedPrecondition);
  int32_t id = 5;
  ASSERT_TRUE(m->forward(empty, &id, 1, false, &logits).ok());
  EXPECT_EQ(m->mtp_forward(empty, -1, &logits).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::v4
