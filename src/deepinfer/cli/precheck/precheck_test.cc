// precheck's parsing of nvidia-smi's CSV (`--format=csv,noheader,nounits`), its verdict per GPU,
// and its report forms. kRecordedH200 is that command's output on the H200 GPU machine, byte for
// byte (docs/precheck_h200.log); the others follow its format, one per GPU generation precheck
// must tell apart.
#include <gtest/gtest.h>

#include "deepinfer/cli/precheck/check_result.h"
#include "deepinfer/cli/precheck/gpu_query.h"

namespace deepinfer::cli::precheck {
namespace {

constexpr const char* kRecordedH200 = "0, NVIDIA H200, 9.0, 143771, 580.159.04\n";
constexpr const char* kTwoH200 =
    "0, NVIDIA H200, 9.0, 143771, 580.95.05\n"
    "1, NVIDIA H200, 9.0, 143771, 580.95.05\n";
constexpr const char* kMixed =
    "0, NVIDIA B200, 10.0, 183359, 580.95.05\r\n"
    "1, Tesla T4, 7.5, 15360, 580.95.05\r\n"
    "\n";

TEST(Precheck, ParsesNvidiaSmiCsv) {
  auto g = parse_gpu_csv(kTwoH200);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[1].index, 1);
  EXPECT_EQ((*g)[0].name, "NVIDIA H200");
  EXPECT_EQ((*g)[0].cc_major, 9);
  EXPECT_EQ((*g)[0].cc_minor, 0);
  EXPECT_EQ((*g)[0].memory_mib, 143771);
  EXPECT_EQ((*g)[0].driver, "580.95.05");
  auto m = parse_gpu_csv(kMixed);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[1].cc_major, 7);
  EXPECT_EQ((*m)[1].cc_minor, 5);
  EXPECT_TRUE(parse_gpu_csv("")->empty());
}

TEST(Precheck, ParsesTheOutputRecordedOnTheH200) {
  auto g = parse_gpu_csv(kRecordedH200);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->size(), 1u);
  EXPECT_EQ((*g)[0].index, 0);
  EXPECT_EQ((*g)[0].name, "NVIDIA H200");
  EXPECT_EQ((*g)[0].cc_major, 9);
  EXPECT_EQ((*g)[0].cc_minor, 0);
  EXPECT_EQ((*g)[0].memory_mib, 143771);
  EXPECT_EQ((*g)[0].driver, "580.159.04");
}

TEST(Precheck, MalformedNvidiaSmiLinesNameLineAndField) {
  auto expect = [](const char* text, const std::string& needle) {
    auto g = parse_gpu_csv(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  };
  expect("0, NVIDIA H200, 9.0, 143771\n", "line 1: expected 5 fields");
  expect("0, NVIDIA H200, 9.0, 143771, 580\nx, H200, 9.0, 1, 580\n", "line 2: index 'x'");
  expect("0, NVIDIA H200, [N/A], 143771, 580\n", "compute_cap '[N/A]'");
  expect("0, NVIDIA H200, 9.0, 140 GiB, 580\n", "memory.total '140 GiB'");
}

TEST(Precheck, Sm90AndSm100PassOtherGpusWarnAndNoGpuWarns) {
  auto r = gpu_checks(*parse_gpu_csv(kMixed));
  ASSERT_EQ(r.size(), 3u);  // the driver, then one line per GPU
  EXPECT_EQ(r[0].name, "nvidia driver");
  EXPECT_EQ(r[1].level, Level::kPass);
  EXPECT_EQ(r[2].level, Level::kWarn);
  EXPECT_NE(r[2].detail.find("Tesla T4"), std::string::npos) << r[2].detail;
  EXPECT_NE(r[2].detail.find("not supported"), std::string::npos) << r[2].detail;
  auto none = gpu_checks({});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].level, Level::kWarn);
  EXPECT_FALSE(any_failed(none));
}

TEST(Precheck, ReportsAsLinesAndJson) {
  const std::vector<CheckResult> r = {{"cmake", Level::kPass, "cmake version 3.25.1"},
                                      {"redis", Level::kFail, "redis://x:1 is not reachable"}};
  EXPECT_EQ(to_text(r),
            "pass  cmake: cmake version 3.25.1\nfail  redis: redis://x:1 is not reachable\n");
  const nlohmann::json j = to_json(r);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["checks"][1]["status"], "fail");
  EXPECT_EQ(j["checks"][0]["name"], "cmake");
  EXPECT_TRUE(any_failed(r));
}

}  // namespace
}  // namespace deepinfer::cli::precheck
