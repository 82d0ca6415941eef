// One rank of an expert-parallel group as its own process (expert_parallel_test.cc starts it):
// joins the TCP group, loads its share of the experts, runs its rank's sequence (the same as the
// test's one-rank reference) and writes the logits and tokens to OUT. --exit-after-join: joins,
// then exits at once (a rank that dies).
// Usage: expert_parallel_rank v4|v41 MODEL_DIR RANK SIZE PORT OUT [--exit-after-join]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "deepinfer/backend/cpu/tcp_collective.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "expert_parallel_util.h"

namespace {

template <class Model, class Options>
int run_rank(const std::string& dir, deepinfer::Collective* group, int size, const char* out) {
  Options o;
  o.expert_group = group;
  auto m = Model::load(dir, o);
  if (!m.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", group->rank(), m.status().to_string().c_str());
    group->abort(m.status().message());
    return 1;
  }
  const auto ps = deepinfer::ep_prompts(size, (*m)->config().vocab_size);
  deepinfer::Run r = deepinfer::run(**m, ps[group->rank()], 6);
  if (!r.status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", group->rank(), r.status.to_string().c_str());
    return 1;
  }
  std::ofstream f(out, std::ios::binary);
  const uint64_t nl = r.logits.size(), nt = r.tokens.size();
  f.write(reinterpret_cast<const char*>(&nl), 8);
  f.write(reinterpret_cast<const char*>(r.logits.data()), nl * sizeof(float));
  f.write(reinterpret_cast<const char*>(&nt), 8);
  f.write(reinterpret_cast<const char*>(r.tokens.data()), nt * sizeof(int32_t));
  return f ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s v4|v41 MODEL_DIR RANK SIZE PORT OUT [--exit-after-join]\n",
                 argv[0]);
    return 2;
  }
  deepinfer::cpu::TcpGroupOptions o;
  o.rank = std::atoi(argv[3]);
  o.size = std::atoi(argv[4]);
  o.port = std::atoi(argv[5]);
  auto group = deepinfer::cpu::join_tcp_group(o);
  if (!group.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, group.status().to_string().c_str());
    return 1;
  }
  if (argc > 7 && std::string(argv[7]) == "--exit-after-join") std::_Exit(0);
  const std::string family = argv[1];
  if (family == "v41")
    return run_rank<deepinfer::v41::CpuModel, deepinfer::v41::ModelOptions>(argv[2], group->get(),
                                                                            o.size, argv[6]);
  return run_rank<deepinfer::v4::CpuModel, deepinfer::v4::ModelOptions>(argv[2], group->get(),
                                                                        o.size, argv[6]);
}
