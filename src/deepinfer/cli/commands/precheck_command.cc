// deepinfer precheck: is this machine ready to run (and rebuild) deepinfer, and for a given model?
// One line per check (pass / warn / fail); exits 1 when something required is missing.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/precheck/check_result.h"
#include "deepinfer/cli/precheck/probes.h"
#include "deepinfer/runtime/device.h"

namespace {

namespace pc = deepinfer::cli::precheck;

int run_precheck(int argc, char** argv) {
  CLI::App app{
      "checks the toolchain, CUDA, GPUs, NCCL/UCX, and with --model the memory and "
      "disk the model needs; exits 1 when something required is missing"};
  std::string model, redis, device;
  bool json = false;
  app.add_option("--model", model, "a checkpoint directory: check its weights fit");
  app.add_option("--device", device,
                 "where --model would run: cpu (weights held as fp32 in host memory) or cuda "
                 "(as stored, on the largest GPU); default: $DEEPINFER_ACCELERATOR, else cpu");
  app.add_option("--kv-cluster-redis", redis, "redis://host:port: check it answers PING");
  app.add_flag("--json", json, "one JSON object instead of lines");
  CLI11_PARSE(app, argc, argv);

  std::vector<pc::CheckResult> results = pc::build_tool_checks();
  const std::vector<pc::GpuInfo> gpus = pc::query_gpus(&results);  // nvidia-smi runs once
  for (pc::CheckResult& r : pc::gpu_stack_checks(gpus)) results.push_back(std::move(r));
  if (!model.empty()) {
    auto d = device.empty() ? deepinfer::runtime::default_device()
                            : deepinfer::runtime::parse_device(device);
    if (!d.ok()) {
      std::cerr << "deepinfer precheck: " << d.status().message() << "\n";
      return 2;
    }
    for (pc::CheckResult& r :
         pc::model_checks(model, *d == deepinfer::runtime::Device::kCuda, gpus))
      results.push_back(std::move(r));
  }
  if (!redis.empty()) results.push_back(pc::redis_check(redis));
  if (json)
    std::cout << pc::to_json(results).dump(2) << "\n";
  else
    std::cout << pc::to_text(results);
  return pc::any_failed(results) ? 1 : 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(precheck_cmd, "precheck",
                           "check this machine (toolchain, CUDA, GPUs, NCCL/UCX, a model's memory)",
                           run_precheck);
