#include "deepinfer/loader/streaming_shard_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/test_util.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// Group g makes "t<g>.weight" (F32, 16 + 8 * (g % 5) values) and "t<g>.scale" (F8_E8M0,
// 4 bytes), each byte a function of (g, position): deterministic, so regenerated copies match.
constexpr size_t kGroups = 40;

std::vector<TensorRecord> make_group(size_t g) {
  std::vector<TensorRecord> out;
  const int64_t n = 16 + 8 * static_cast<int64_t>(g % 5);
  TensorRecord w{"t" + std::to_string(g) + ".weight", DType::kF32, {n}, {}};
  for (int64_t i = 0; i < n * 4; ++i) w.bytes.push_back(static_cast<uint8_t>(g * 31 + i * 7));
  TensorRecord s{"t" + std::to_string(g) + ".scale", DType::kF8E8M0, {4}, {}};
  for (int i = 0; i < 4; ++i) s.bytes.push_back(static_cast<uint8_t>(120 + g + i));
  out.push_back(std::move(w));
  out.push_back(std::move(s));
  return out;
}

void plan_all(std::vector<PlannedTensor>* tensors, std::vector<size_t>* group_of) {
  for (size_t g = 0; g < kGroups; ++g)
    for (const TensorRecord& r : make_group(g)) {
      tensors->push_back({r.name, r.dtype, r.shape, r.bytes.size()});
      group_of->push_back(g);
    }
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// The in-memory writer is the reference: same tensors and shard size, same bytes on disk.
TEST(StreamingShardWriter, WritesTheSameFilesAsTheInMemoryWriter) {
  constexpr size_t kShardBytes = 300;  // several groups' tensors straddle shard boundaries
  TempDir reference, streamed;
  std::vector<TensorRecord> all;
  for (size_t g = 0; g < kGroups; ++g)
    for (TensorRecord& r : make_group(g)) all.push_back(std::move(r));
  ASSERT_TRUE(
      write_sharded_safetensors(reference.path(), all, kShardBytes, {{"format", "pt"}}).ok());

  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  plan_all(&tensors, &group_of);
  ThreadPool pool(4);
  StreamingWriteOptions o;
  o.max_shard_bytes = kShardBytes;
  o.metadata = {{"format", "pt"}};
  o.pool = &pool;
  size_t progress_calls = 0;
  o.progress = [&](const StreamingWriteProgress& p) {
    ++progress_calls;
    EXPECT_EQ(p.shards_written, progress_calls);  // in order, one call at a time
  };
  auto done = write_sharded_streaming(
      streamed.path(), tensors, group_of,
      [](size_t g) -> StatusOr<std::vector<TensorRecord>> { return make_group(g); }, o);
  ASSERT_TRUE(done.ok()) << done.status().to_string();

  const std::set<std::string> names = files_in(reference.path());
  ASSERT_GT(names.size(), 4u);  // really sharded
  EXPECT_EQ(files_in(streamed.path()), names);
  for (const std::string& n : names)
    EXPECT_EQ(read_file_bytes(streamed.path() + "/" + n),
              read_file_bytes(reference.path() + "/" + n))
        << n;
  EXPECT_EQ(done->shards_written, names.size() - 1);  // all but the index
  EXPECT_EQ(progress_calls, done->shards_written);
  EXPECT_EQ(done->tensors_written, 2 * kGroups);
  auto ckpt = Checkpoint::open(streamed.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ((*ckpt)->canonical_names().size(), 2 * kGroups);
}

// While shard s is being made, every shard before s - 1 is already on disk: at most two shards
// (the one being made, the one being written) are in memory. Observed from the makers, through
// the file system, independently of the writer's own tally (which must agree).
TEST(StreamingShardWriter, HoldsAtMostTwoShards) {
  constexpr size_t kShardBytes = 200;
  TempDir dir;
  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  plan_all(&tensors, &group_of);
  auto plan = plan_shards(tensors, kShardBytes);
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->shards.size(), 8u);
  std::map<size_t, size_t> first_shard_of_group;  // the shard a group is first made for
  for (size_t s = plan->shards.size(); s-- > 0;)
    for (size_t i : plan->shards[s])
      first_shard_of_group[std::stoul(plan->tensors[i].name.substr(1))] = s;

  std::mutex mu;
  size_t violations = 0, calls = 0;
  ThreadPool pool(4);
  StreamingWriteOptions o;
  o.max_shard_bytes = kShardBytes;
  o.pool = &pool;
  auto done = write_sharded_streaming(
      dir.path(), tensors, group_of,
      [&](size_t g) -> StatusOr<std::vector<TensorRecord>> {
        std::lock_guard<std::mutex> lock(mu);
        ++calls;
        const size_t s = first_shard_of_group[g];
        for (size_t earlier = 0; earlier + 1 < s; ++earlier)
          if (!fs::exists(dir.path() + "/" + plan->files[earlier])) ++violations;
        return make_group(g);
      },
      o);
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  EXPECT_EQ(violations, 0u);
  EXPECT_LE(done->max_shards_held, 2u);
  EXPECT_LE(done->max_bytes_held, 2 * kShardBytes);
  // A group is made once per shard it has tensors in: never more than twice here.
  EXPECT_LE(calls, 2 * kGroups);
}

TEST(StreamingShardWriter, ReportsMakerErrorsAndTensorsThatAreNotThePlannedOnes) {
  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  plan_all(&tensors, &group_of);
  StreamingWriteOptions o;
  o.max_shard_bytes = 256;
  {
    TempDir dir;
    auto st = write_sharded_streaming(
        dir.path(), tensors, group_of,
        [](size_t g) -> StatusOr<std::vector<TensorRecord>> {
          if (g == 7) return resource_exhausted("no memory for group 7");
          return make_group(g);
        },
        o);
    EXPECT_EQ(st.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(st.status().message().find("group 7"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir.path() + "/model.safetensors.index.json"));
  }
  {
    TempDir dir;
    auto st = write_sharded_streaming(
        dir.path(), tensors, group_of,
        [](size_t g) -> StatusOr<std::vector<TensorRecord>> {
          auto out = make_group(g);
          if (g == 3) out[0].shape = {1, out[0].shape[0]};  // same bytes, another shape
          return out;
        },
        o);
    EXPECT_EQ(st.status().code(), StatusCode::kInternal);
    EXPECT_NE(st.status().message().find("t3.weight"), std::string::npos);
  }
  {
    TempDir dir;
    auto st = write_sharded_streaming(
        dir.path(), tensors, group_of,
        [](size_t g) -> StatusOr<std::vector<TensorRecord>> {
          auto out = make_group(g);
          if (g == 5) out.pop_back();  // forgets t5.scale
          return out;
        },
        o);
    EXPECT_EQ(st.status().code(), StatusCode::kInternal);
    EXPECT_NE(st.status().message().find("t5.scale"), std::string::npos);
  }
}

TEST(StreamingShardWriter, RejectsDuplicateNamesAndMismatchedGroups) {
  TempDir dir;
  std::vector<PlannedTensor> tensors = {{"a", DType::kF32, {1}, 4}, {"a", DType::kF32, {1}, 4}};
  auto make = [](size_t) -> StatusOr<std::vector<TensorRecord>> {
    return std::vector<TensorRecord>{};
  };
  EXPECT_EQ(write_sharded_streaming(dir.path(), tensors, {0, 1}, make, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write_sharded_streaming(dir.path(), tensors, {0}, make, {}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
