// deepinfer recipe encode|parse: the chat recipe over JSON lines.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/recipe/streaming_parser.h"

namespace {

using deepinfer::recipe::Json;
using deepinfer::recipe::Variant;

std::string error_line(const std::string& msg) { return Json{{"error", msg}}.dump(); }

// Tool calls with arguments_json beside the exact arguments text, as in chat_parsing.jsonl.
Json message_json(const deepinfer::recipe::ParsedMessage& m) {
  Json calls = Json::array();
  for (const auto& c : m.tool_calls) {
    Json f = {{"name", c.name}, {"arguments", c.arguments}};
    Json parsed;
    if (deepinfer::recipe::python_json_loads(c.arguments, &parsed)) f["arguments_json"] = parsed;
    calls.push_back({{"type", "function"}, {"function", f}});
  }
  return Json{
      {"reasoning_content", m.reasoning_content}, {"content", m.content}, {"tool_calls", calls}};
}

int run_recipe(int argc, char** argv) {
  CLI::App app{"DeepSeek chat recipe over JSON lines", "deepinfer recipe"};
  app.require_subcommand(1);
  std::string version = "v4.1";
  app.add_option("--model-version", version, "chat format: v4.1 (default) or v4")
      ->check(CLI::IsMember({"v4.1", "v4"}));
  auto* enc = app.add_subcommand("encode", "OpenAI chat requests -> {\"prompt\": ...}");
  auto* parse = app.add_subcommand(
      "parse", "{\"completion_text\", \"thinking_mode\"} -> the parsed message or {\"error\"}");
  bool stream = false;
  size_t chunk = 1;
  parse->add_flag("--stream", stream, "use the streaming parser (fed --chunk bytes at a time)");
  parse->add_option("--chunk", chunk, "bytes per feed with --stream (default 1)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Variant variant = version == "v4" ? Variant::kV4 : Variant::kV41;
  std::ios::sync_with_stdio(false);
  std::string line;
  int failures = 0;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty()) continue;
    std::string where = "line " + std::to_string(n) + ": ";
    Json in;
    try {
      in = Json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      std::cout << error_line(where + "not valid JSON: " + e.what()) << "\n";
      ++failures;
      continue;
    }
    if (enc->parsed()) {
      auto prompt = deepinfer::recipe::encode_chat_request(in, variant);
      if (!prompt.ok()) {
        std::cout << error_line(prompt.status().message()) << "\n";
        ++failures;
      } else {
        std::cout << Json{{"prompt", *prompt}}.dump() << "\n";
      }
      continue;
    }
    if (!in.is_object() || !in.contains("completion_text") || !in["completion_text"].is_string()) {
      std::cout << error_line(where + "completion_text: expected a string") << "\n";
      ++failures;
      continue;
    }
    std::string mode = in.value("thinking_mode", std::string("chat"));
    if (mode != "chat" && mode != "thinking") {
      std::cout << error_line(where + "thinking_mode: expected 'chat' or 'thinking'") << "\n";
      ++failures;
      continue;
    }
    const std::string& text = in["completion_text"].get_ref<const std::string&>();
    if (stream) {
      deepinfer::recipe::StreamingParser p(mode == "thinking", variant);
      deepinfer::recipe::StreamDelta d;
      for (size_t i = 0; i < text.size(); i += chunk)
        p.feed(std::string_view(text).substr(i, chunk), &d);
      p.finish(&d);
      // The same verdict as the strict parser: a malformed completion is an error either way.
      if (!p.malformed().ok()) {
        std::cout << error_line(p.malformed().message()) << "\n";
        ++failures;
      } else {
        std::cout << message_json(p.message()).dump() << "\n";
      }
    } else {
      auto msg = deepinfer::recipe::parse_completion(text, mode == "thinking", variant);
      if (!msg.ok()) {
        std::cout << error_line(msg.status().message()) << "\n";
        ++failures;
      } else {
        std::cout << message_json(*msg).dump() << "\n";
      }
    }
  }
  return failures ? 1 : 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(recipe_cmd, "recipe",
                           "DeepSeek chat recipe: encode requests, parse completions", run_recipe);
