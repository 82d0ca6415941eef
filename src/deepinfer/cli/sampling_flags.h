// Sampling flags shared by `generate` and `chat`, named like vLLM's SamplingParams fields.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

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
  app.add_option_function<uint64_t>(
      "--seq-seed", [p](const uint64_t& v) { p->seq_seed = v; },
      "deterministic sampling: token i's draw depends only on (seq-seed, i); wins over --seed");
}

// --regex R | --json-schema FILE | --ebnf FILE | --json-object (at most one): so_args.
struct StructuredOutputFlags {
  std::string regex, json_schema_file, ebnf_file;
  bool json_object = false;
};

inline void add_structured_output_flags(CLI::App& app, StructuredOutputFlags* f) {
  auto* r = app.add_option("--regex", f->regex, "constrain the output to this regex (full match)");
  auto* j = app.add_option("--json-schema", f->json_schema_file,
                           "constrain the output to JSON valid under the schema in FILE");
  auto* e = app.add_option("--ebnf", f->ebnf_file,
                           "constrain the output to the EBNF grammar in "
                           "FILE (GBNF dialect, start rule root)");
  auto* o = app.add_flag("--json-object", f->json_object, "constrain the output to a JSON object");
  r->excludes(j)->excludes(e)->excludes(o);
  j->excludes(e)->excludes(o);
  e->excludes(o);
}

// The so_args the flags ask for (nullopt: none). File errors name the flag and the file.
inline StatusOr<std::optional<sample::StructuredOutput>> structured_output_from_flags(
    const StructuredOutputFlags& f) {
  using Kind = sample::StructuredOutput::Kind;
  using So = sample::StructuredOutput;
  using Out = std::optional<So>;
  auto read = [](const std::string& flag, const std::string& path) -> StatusOr<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found(flag + ": cannot read '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  if (!f.regex.empty()) return Out(So{Kind::kRegex, f.regex});
  if (f.json_object) return Out(So{Kind::kJsonObject, ""});
  if (!f.json_schema_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, read("--json-schema", f.json_schema_file));
    return Out(So{Kind::kJsonSchema, std::move(text)});
  }
  if (!f.ebnf_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, read("--ebnf", f.ebnf_file));
    return Out(So{Kind::kEbnf, std::move(text)});
  }
  return Out();
}

}  // namespace deepinfer::cli
