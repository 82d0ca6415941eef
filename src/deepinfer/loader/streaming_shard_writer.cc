#include "deepinfer/loader/streaming_shard_writer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "deepinfer/base/thread_pool.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// What is held in memory for shards, and the most ever held: the bound the writer promises.
class HeldTally {
 public:
  void begin_shard() {
    std::lock_guard<std::mutex> lock(mu_);
    p_.max_shards_held = std::max(p_.max_shards_held, ++shards_);
  }
  void add_bytes(uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_ += n;
    p_.max_bytes_held = std::max(p_.max_bytes_held, bytes_);
  }
  StreamingWriteProgress end_shard(size_t tensors, uint64_t bytes, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    --shards_;
    bytes_ -= bytes;
    ++p_.shards_written;
    p_.tensors_written += tensors;
    p_.bytes_written += bytes;
    p_.seconds = seconds;
    return p_;
  }
  StreamingWriteProgress progress() {
    std::lock_guard<std::mutex> lock(mu_);
    return p_;
  }
  void set_totals(size_t shards, size_t tensors, uint64_t bytes) {
    p_.shards = shards, p_.tensors = tensors, p_.total_bytes = bytes;
  }

 private:
  std::mutex mu_;
  size_t shards_ = 0;
  uint64_t bytes_ = 0;
  StreamingWriteProgress p_;
};

bool same_layout(const TensorRecord& r, const PlannedTensor& p) {
  return r.dtype == p.dtype && r.shape == p.shape && r.bytes.size() == p.bytes;
}

}  // namespace

StatusOr<StreamingWriteProgress> write_sharded_streaming(const std::string& dir,
                                                         std::vector<PlannedTensor> tensors,
                                                         const std::vector<size_t>& group_of,
                                                         const MakeTensorGroup& make,
                                                         const StreamingWriteOptions& options) {
  if (group_of.size() != tensors.size())
    return invalid_argument(dir + ": " + std::to_string(tensors.size()) + " tensors but " +
                            std::to_string(group_of.size()) + " group ids");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalid_argument(dir + ": cannot create directory: " + ec.message());
  std::unordered_map<std::string, size_t> groups_by_name;
  for (size_t i = 0; i < tensors.size(); ++i) groups_by_name[tensors[i].name] = group_of[i];
  const auto& group_by_name = groups_by_name;  // read-only from here (makers read it at once)
  StatusOr<ShardPlan> planned = plan_shards(std::move(tensors), options.max_shard_bytes);
  if (!planned.ok()) return invalid_argument(dir + ": " + planned.status().message());
  const ShardPlan& plan = *planned;

  // Per planned tensor: its shard and its slot within the shard; by name: its index.
  std::vector<size_t> shard_of(plan.tensors.size()), slot_of(plan.tensors.size());
  std::unordered_map<std::string, size_t> index_of;
  for (size_t s = 0; s < plan.shards.size(); ++s)
    for (size_t k = 0; k < plan.shards[s].size(); ++k) {
      shard_of[plan.shards[s][k]] = s;
      slot_of[plan.shards[s][k]] = k;
    }
  for (size_t i = 0; i < plan.tensors.size(); ++i) index_of[plan.tensors[i].name] = i;

  ThreadPool& pool = options.pool ? *options.pool : ThreadPool::default_pool();
  const auto start = std::chrono::steady_clock::now();
  HeldTally tally;
  tally.set_totals(plan.shards.size(), plan.tensors.size(), plan.total_bytes);
  std::mutex callback_mu;
  std::thread writer;  // writes shard s - 1 while shard s is made
  Status writer_status = ok_status();
  auto join_writer = [&] {
    if (writer.joinable()) writer.join();
  };

  for (size_t s = 0; s < plan.shards.size(); ++s) {
    std::vector<size_t> groups;
    std::unordered_set<size_t> seen;
    for (size_t i : plan.shards[s])
      if (seen.insert(group_by_name.at(plan.tensors[i].name)).second)
        groups.push_back(group_by_name.at(plan.tensors[i].name));
    std::vector<TensorRecord> slots(plan.shards[s].size());
    std::vector<char> filled(slots.size(), 0);
    tally.begin_shard();
    std::mutex error_mu;
    Status error = ok_status();
    auto fail = [&](Status st) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (error.ok()) error = std::move(st);
    };
    pool.parallel_for(static_cast<int64_t>(groups.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        StatusOr<std::vector<TensorRecord>> made = make(groups[g]);
        if (!made.ok()) return fail(made.status());
        for (TensorRecord& r : *made) {
          auto it = index_of.find(r.name);
          if (it == index_of.end() || group_by_name.at(r.name) != groups[g])
            return fail(internal_error(dir + ": made tensor '" + r.name + "' was not planned"));
          if (shard_of[it->second] != s) continue;  // made again for its own shard
          if (!same_layout(r, plan.tensors[it->second]))
            return fail(internal_error(dir + ": made tensor '" + r.name +
                                       "' differs from its plan (dtype, shape or bytes)"));
          tally.add_bytes(r.bytes.size());
          slots[slot_of[it->second]] = std::move(r);
          filled[slot_of[it->second]] = 1;  // each slot has one maker: no race
        }
      }
    });
    for (size_t k = 0; k < slots.size() && error.ok(); ++k)
      if (!filled[k])
        error = internal_error(dir + ": tensor '" + plan.tensors[plan.shards[s][k]].name +
                               "' was planned but not made");
    join_writer();
    if (!error.ok()) return error;
    RETURN_IF_ERROR(writer_status);
    writer = std::thread([&, s, slots = std::move(slots)]() mutable {
      uint64_t bytes = 0;
      {
        SafetensorsWriter shard;
        for (TensorRecord& r : slots) {
          bytes += r.bytes.size();
          shard.add(std::move(r));
        }
        writer_status = shard.write((fs::path(dir) / plan.files[s]).string(), options.metadata);
      }  // the shard's bytes are freed here
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const StreamingWriteProgress p = tally.end_shard(plan.shards[s].size(), bytes, seconds);
      if (options.progress && writer_status.ok()) {
        std::lock_guard<std::mutex> lock(callback_mu);
        options.progress(p);
      }
    });
  }
  join_writer();
  RETURN_IF_ERROR(writer_status);
  RETURN_IF_ERROR(write_shard_index(dir, plan));
  return tally.progress();
}

}  // namespace deepinfer
