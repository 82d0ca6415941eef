#include "deepinfer/model/eplb/eplb_planner.h"

#include <algorithm>
#include <numeric>

namespace deepinfer {
namespace {

struct Copy {
  int32_t expert;
  double load;
};

// Step 1: copies per expert.
std::vector<int> replicate(const std::vector<uint64_t>& count, int num_ranks, int redundant) {
  const int E = static_cast<int>(count.size());
  std::vector<int> copies(E, 1);
  for (int i = 0; i < redundant; ++i) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      if (copies[e] >= num_ranks) continue;
      // count[e] / copies[e] > count[best] / copies[best], exactly.
      if (best < 0 || static_cast<unsigned __int128>(count[e]) * copies[best] >
                          static_cast<unsigned __int128>(count[best]) * copies[e])
        best = e;
    }
    ++copies[best];  // exists: redundant <= E * (num_ranks - 1) was checked
  }
  return copies;
}

// Step 2: copies onto ranks.
std::vector<std::vector<int32_t>> pack(const std::vector<uint64_t>& count,
                                       const std::vector<int>& copies, int num_ranks, int slots) {
  std::vector<Copy> all;
  for (size_t e = 0; e < count.size(); ++e)
    for (int c = 0; c < copies[e]; ++c)
      all.push_back({static_cast<int32_t>(e), static_cast<double>(count[e]) / copies[e]});
  std::stable_sort(all.begin(), all.end(), [](const Copy& a, const Copy& b) {
    return a.load != b.load ? a.load > b.load : a.expert < b.expert;
  });
  std::vector<std::vector<Copy>> on(num_ranks);
  std::vector<double> load(num_ranks, 0.0);
  auto has = [&](int r, int32_t e) {
    return std::any_of(on[r].begin(), on[r].end(), [e](const Copy& c) { return c.expert == e; });
  };
  auto least = [&](auto&& eligible) {
    int best = -1;
    for (int r = 0; r < num_ranks; ++r)
      if (eligible(r) && (best < 0 || load[r] < load[best])) best = r;
    return best;
  };
  for (const Copy& c : all) {
    int r =
        least([&](int q) { return static_cast<int>(on[q].size()) < slots && !has(q, c.expert); });
    if (r < 0) {
      // Every rank with a free slot holds c.expert. A full rank without it holds some expert the
      // free rank lacks (it has more distinct experts): move the lightest such copy over. A
      // safety net so a plan always exists: 200k random small cases never reached it.
      const int free_rank = least([&](int q) { return static_cast<int>(on[q].size()) < slots; });
      r = least([&](int q) { return !has(q, c.expert); });
      size_t move = on[r].size();
      for (size_t i = 0; i < on[r].size(); ++i)
        if (!has(free_rank, on[r][i].expert) &&
            (move == on[r].size() || on[r][i].load < on[r][move].load))
          move = i;
      const Copy moved = on[r][move];
      on[r].erase(on[r].begin() + static_cast<std::ptrdiff_t>(move));
      load[r] -= moved.load;
      on[free_rank].push_back(moved);
      load[free_rank] += moved.load;
    }
    on[r].push_back(c);
    load[r] += c.load;
  }
  std::vector<std::vector<int32_t>> experts(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    for (const Copy& c : on[r]) experts[r].push_back(c.expert);
    std::sort(experts[r].begin(), experts[r].end());
  }
  return experts;
}

}  // namespace

StatusOr<ExpertPlacement> plan_placement(const RoutingCounts& counts, int num_ranks,
                                         int redundant) {
  if (counts.empty() || counts[0].empty())
    return invalid_argument("routing counts: no layer or no expert");
  const int E = static_cast<int>(counts[0].size());
  for (size_t l = 0; l < counts.size(); ++l)
    if (static_cast<int>(counts[l].size()) != E)
      return invalid_argument("routing counts: layer " + std::to_string(l) + " has " +
                              std::to_string(counts[l].size()) + " experts, layer 0 has " +
                              std::to_string(E));
  if (num_ranks < 1) return invalid_argument("--ranks must be >= 1");
  if (redundant < 0) return invalid_argument("--redundant must be >= 0");
  if ((E + redundant) % num_ranks != 0) {
    const int next = redundant + num_ranks - (E + redundant) % num_ranks;
    return invalid_argument("--redundant " + std::to_string(redundant) + ": " + std::to_string(E) +
                            " experts + redundant copies must split evenly over --ranks " +
                            std::to_string(num_ranks) + " (e.g. --redundant " +
                            std::to_string(next) + ")");
  }
  const int slots = (E + redundant) / num_ranks;
  if (slots > E)
    return invalid_argument("--redundant " + std::to_string(redundant) + ": " +
                            std::to_string(slots) + " slots per rank, more than the " +
                            std::to_string(E) + " experts (a rank holds an expert at most once)");
  std::vector<std::vector<std::vector<int32_t>>> ranks;
  for (const std::vector<uint64_t>& count : counts)
    ranks.push_back(pack(count, replicate(count, num_ranks, redundant), num_ranks, slots));
  return ExpertPlacement::create(E, std::move(ranks));
}

std::vector<double> rank_loads(const ExpertPlacement& p, const RoutingCounts& counts, int layer) {
  std::vector<double> load(p.num_ranks(), 0.0);
  for (int r = 0; r < p.num_ranks(); ++r)
    for (int32_t e : p.experts_on(layer, r))
      load[r] += static_cast<double>(counts[layer][e]) / p.replicas(layer, e).size();
  return load;
}

}  // namespace deepinfer
