// Sampling flags shared by `generate` and `chat`, named like vLLM's SamplingParams fields.
#pragma once

#include <CLI/CLI.hpp>

#include "deepinfer/sample/sampling_params.h"

namespace deepinfer::cli {

inline void add_sampling_flags(CLI::App& app, sample::SamplingParams* p,
                               std::vector<std::string>* stop, uint64_t* seed, bool* has_seed) {
  app.add_option("--max-tokens", p->max_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temperature", p->temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-p", p->top_p, "nucleus sampling mass")->capture_default_str();
  app.add_option("--top-k", p->top_k, "keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  app.add_option("--min-p", p->min_p, "drop tokens below min_p x the top probability")
      ->capture_default_str();
  app.add_option("--repetition-penalty", p->repetition_penalty)->capture_default_str();
  app.add_option("--frequency-penalty", p->frequency_penalty)->capture_default_str();
  app.add_option("--presence-penalty", p->presence_penalty)->capture_default_str();
  app.add_option("--stop", *stop, "stop string (repeatable)");
  app.add_flag("--ignore-eos", p->ignore_eos, "keep going past the end-of-sequence token");
  auto* s = app.add_option("--seed", *seed, "per-request seed for reproducible sampling");
  s->each([has_seed](const std::string&) { *has_seed = true; });
}

}  // namespace deepinfer::cli
