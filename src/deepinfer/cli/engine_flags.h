// Engine flags shared by generate, chat, serve and bench (vLLM spellings where they exist), and
// the one capacity line those commands print once the engine is up.
#pragma once

#include <CLI/CLI.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"

namespace deepinfer::cli {

// --device, --numerics, --gpu-memory-utilization, --no-cuda-graphs, --kv-memory, the scheduler
// and prefix-cache flags, and DeepSeek's switches (--batch-invariant, --yoco-prefill-*). A bad
// value is a parse error that names its flag.
void add_engine_flags(CLI::App& app, EngineArgs* a);

// After parsing: without --device, the device comes from DEEPINFER_ACCELERATOR (nvidia | cpu),
// else cpu. An unknown DEEPINFER_ACCELERATOR value is an error naming it.
Status resolve_engine_device(EngineArgs* a);

// One line to stderr: "deepinfer COMMAND: device cuda (NVIDIA H200), numerics plain, weights
// 100.2 GiB; KV pool N pages of B bytes: up to T tokens for one sequence, or S sequences of up to
// one page of tokens each".
void print_engine_capacity(const char* command, const EngineCapacity& cap);

}  // namespace deepinfer::cli
