// deepinfer chat: an interactive conversation through the DeepSeek recipe. Reasoning is shown
// dimmed (or marked with "[thinking]" when stdout is not a terminal).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/cli/sampling_flags.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/streaming_parser.h"

namespace {

int run_chat(int argc, char** argv) {
  std::string model_arg, system_prompt;
  deepinfer::EngineArgs args;
  deepinfer::sample::SamplingParams params;
  params.max_tokens = 256;
  std::vector<std::string> stop;
  uint64_t seed = 0;
  bool has_seed = false, thinking = false;
  CLI::App app{
      "Chat interactively (one message per line; Ctrl-D ends). With no MODEL_DIR: "
      "$DEEPINFER_HF_MODEL_DIR, else the embedded default tiny model.",
      "deepinfer chat"};
  app.add_option("MODEL_DIR", model_arg, "checkpoint directory");
  app.add_option("--system", system_prompt, "system prompt");
  app.add_flag("--thinking", thinking, "thinking mode (reasoning before the answer)");
  deepinfer::cli::add_sampling_flags(app, &params, &stop, &seed, &has_seed);
  deepinfer::cli::add_engine_flags(app, &args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (auto st = deepinfer::cli::resolve_engine_device(&args); !st.ok()) {
    std::cerr << "deepinfer chat: " << st.to_string() << "\n";
    return 1;
  }
  params.stop = stop;
  if (has_seed) params.seed = seed;
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) {
    std::cerr << "deepinfer chat: " << dir.status().to_string() << "\n";
    return 1;
  }
  args.model = *dir;
  auto engine = deepinfer::Engine::create(args);
  if (!engine.ok()) {
    std::cerr << "deepinfer chat: " << engine.status().to_string() << "\n";
    return 1;
  }
  deepinfer::cli::print_engine_capacity("chat", (*engine)->capacity());
  const bool tty = isatty(STDOUT_FILENO);
  const char* dim = tty ? "\033[2m" : "[thinking] ";
  const char* undim = tty ? "\033[0m" : "\n";
  nlohmann::json messages = nlohmann::json::array();
  if (!system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", system_prompt}});
  std::string line;
  while (true) {
    if (tty) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    deepinfer::GenerateRequest req;
    req.chat =
        nlohmann::json{{"messages", messages}, {"chat_template_kwargs", {{"thinking", thinking}}}};
    req.params = params;
    deepinfer::recipe::StreamingParser parser(thinking, (*engine)->chat_variant());
    bool in_reasoning = false;
    auto show = [&](const deepinfer::recipe::StreamDelta& d) {
      if (!d.reasoning.empty()) {
        if (!in_reasoning) std::cout << dim;
        in_reasoning = true;
        std::cout << d.reasoning;
      }
      if (!d.content.empty()) {
        if (in_reasoning) std::cout << undim;
        in_reasoning = false;
        std::cout << d.content;
      }
      std::cout << std::flush;
    };
    std::promise<deepinfer::Status> done;
    auto st = (*engine)->submit(req, [&](const deepinfer::RequestOutput& o) {
      deepinfer::recipe::StreamDelta d;
      parser.feed(o.outputs[0].delta_text, &d);
      if (o.finished) parser.finish(&d, /*eos_in_text=*/false);  // the engine drops EOS text
      show(d);
      if (o.finished) done.set_value(o.status);
    });
    if (st.ok()) st = done.get_future().get();  // the engine's reason when it ended the reply
    if (in_reasoning) std::cout << undim;
    if (!st.ok()) {
      std::cout << "\n";
      std::cerr << "deepinfer chat: " << st.to_string() << "\n";
      messages.erase(messages.end() - 1);
      continue;
    }
    std::cout << "\n";
    const auto& msg = parser.message();
    nlohmann::json reply = {{"role", "assistant"}, {"content", msg.content}};
    if (!msg.reasoning_content.empty()) reply["reasoning_content"] = msg.reasoning_content;
    messages.push_back(reply);
  }
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kChat, "chat", "interactive chat through the DeepSeek recipe", run_chat);
