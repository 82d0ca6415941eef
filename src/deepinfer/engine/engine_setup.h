// What Engine::create derives from EngineArgs before the engine exists: the scheduler's config,
// the runner's options, the prefix cache's options (with its lower tiers opened), the
// expert-parallel group and the tokenizer; and the step statistics' bookkeeping. Errors name the
// argument.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/prefix_caching.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/runtime/expert_group.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/sched/scheduler.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer {

// The step budget EngineArgs::max_num_batched_tokens = 0 stands for: 8192 on cuda (vLLM's server
// default on GPUs of 70 GiB and more; a 4k prompt in one chunk), 2048 on cpu (decision 0019).
int64_t default_batched_tokens(runtime::Device d);
// The device args names, else runtime::default_device()'s.
StatusOr<runtime::Device> engine_device(const EngineArgs& args);
// A budget of 0 becomes engine_device's default (a negative one stays, for validate's error).
Status resolve_step_budget(EngineArgs* args);
// After the runner is made: a runner that serves shorter sequences than the default lowers a
// defaulted max_model_len, and one whose sequences hold fixed slots caps max_num_seqs.
void fit_to_runner(const runtime::ModelInfo& info, EngineArgs* args);

sched::SchedulerConfig sched_config(const EngineArgs& a);

// Everything of RunnerOptions that comes from the arguments alone (not the switches or the
// expert-parallel group), after checking them.
StatusOr<runtime::RunnerOptions> runner_options(const EngineArgs& args);

// The prefix cache's options for a model of fingerprint `fp` and pages of `page_tokens`;
// *tiers gets its host/disk/cluster tiers when any is configured (else null).
StatusOr<PrefixCachingOptions> prefix_cache_options(const EngineArgs& args, const std::string& fp,
                                                    int page_tokens,
                                                    std::unique_ptr<kv::UnitTiers>* tiers);

// Expert parallelism: joins the group args asks for (null for one rank) and points *ro at it;
// refuses the combinations not built yet, and speculative decoding on the GPU, by flag.
StatusOr<std::unique_ptr<Collective>> join_group_if_asked(const EngineArgs& args,
                                                          const Switches& switches,
                                                          runtime::RunnerOptions* ro);

// The model's tokenizer (null without tokenizer.json) and the debug_scripted_output tokens.
Status load_tokenizer(const EngineArgs& args, std::unique_ptr<tokenizer::Tokenizer>* tok,
                      std::vector<int32_t>* scripted);

// submit's checks of a prompt: not empty, every id in the vocabulary, prompt + max_tokens
// within max_model_len.
Status check_prompt(const std::vector<int32_t>& prompt, int64_t max_tokens, int64_t vocab,
                    int64_t max_model_len);
// submit's check that one sequence of the request fits the KV pool at all: its state holds at
// most prompt + max_new_tokens - 1 tokens (the last sampled one is never fed back), and the pool
// holds `pool_tokens` for one sequence. Otherwise the scheduler could never run it.
Status check_pool_room(int64_t prompt_len, int64_t max_new_tokens, int64_t pool_tokens);
// Engine::capacity: the pool's figures, the longest sequence bounded by max_model_len too (a
// slot page holds one sequence), and the runner's device and weights.
EngineCapacity engine_capacity(const kv::KvCapacity& c, const kv::PageSpec& spec,
                               const runtime::ModelInfo& info, int64_t max_model_len);
// The request's retention class: its own, else agent with tools and chat without.
kv::Retention request_retention(const GenerateRequest& r);

// One step's figures added into the running totals (stats() reports them).
void add_step_stats(const EngineStats& step, EngineStats* total);

}  // namespace deepinfer
