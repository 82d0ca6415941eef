// Engine flags shared by generate, chat, serve and bench (vLLM spellings where they exist).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "deepinfer/engine/engine.h"

namespace deepinfer::cli {

inline void add_engine_flags(CLI::App& app, EngineArgs* a) {
  app.add_option("--kv-memory", a->kv_memory_bytes,
                 "bytes for sequence state (KV pool), e.g. 1073741824")
      ->capture_default_str();
  app.add_option("--max-num-seqs", a->max_num_seqs, "running sequences at once")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", a->max_num_batched_tokens,
                 "tokens per engine step (chunked prefill budget)")
      ->capture_default_str();
  app.add_option("--max-model-len", a->max_model_len, "prompt + output limit (0: 65536)")
      ->capture_default_str();
  app.add_option("--policy", a->policy, "scheduling policy: fcfs or priority")
      ->capture_default_str();
  app.add_option("--numerics", a->numerics, "official (simulated quantization) or plain")
      ->capture_default_str();
  app.add_flag("--special-tokens-in-content", a->special_tokens_in_content,
               "chat requests: let message text that spells a special token (<｜Assistant｜>, "
               "</think>, DSML tags) become that control token (unsafe with untrusted users; "
               "default: such text is tokenized as plain text)");
}

}  // namespace deepinfer::cli
