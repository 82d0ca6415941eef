// deepinfer tokenize: JSON lines in, JSON lines out, for scripting and conformance checks.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace {

std::string error_json_line(const std::string& msg) {
  return nlohmann::json{{"error", msg}}.dump();
}

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Encode {\"text\"} lines to {\"ids\"} lines (or decode with --decode)",
               "deepinfer tokenize"};
  std::string dir;
  bool no_special = false, decode = false, skip_special = false;
  app.add_option("--tokenizer", dir, "directory holding tokenizer.json, or the file")->required();
  app.add_flag("--no-special", no_special, "treat added-token text as ordinary text");
  app.add_flag("--decode", decode, "read {\"ids\": [...]} lines and write {\"text\": ...}");
  app.add_flag("--skip-special", skip_special, "with --decode: leave out special tokens");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(dir);
  if (!tok.ok()) {
    std::cerr << "deepinfer tokenize: " << tok.status().to_string() << "\n";
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  int failures = 0;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty()) continue;
    std::string where = "line " + std::to_string(n) + ": ";
    nlohmann::json in;
    try {
      in = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      std::cout << error_json_line(where + "not valid JSON: " + e.what()) << "\n";
      ++failures;
      continue;
    }
    if (decode) {
      if (!in.is_object() || !in.contains("ids") || !in["ids"].is_array()) {
        std::cout << error_json_line(where + "ids: expected an array of integers") << "\n";
        ++failures;
        continue;
      }
      std::vector<int32_t> ids;
      bool ok = true;
      for (const auto& v : in["ids"]) {
        if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN ||
            v.get<int64_t>() > INT32_MAX) {
          ok = false;
          break;
        }
        ids.push_back(v.get<int32_t>());
      }
      if (!ok) {
        std::cout << error_json_line(where + "ids: expected an array of integers") << "\n";
        ++failures;
        continue;
      }
      auto text = (*tok)->decode(ids, skip_special);
      if (!text.ok()) {
        std::cout << error_json_line(where + text.status().message()) << "\n";
        ++failures;
        continue;
      }
      std::cout << nlohmann::json{{"text", *text}}.dump() << "\n";
    } else {
      if (!in.is_object() || !in.contains("text") || !in["text"].is_string()) {
        std::cout << error_json_line(where + "text: expected a string") << "\n";
        ++failures;
        continue;
      }
      auto ids = (*tok)->encode(in["text"].get<std::string>(), !no_special);
      if (!ids.ok()) {
        std::cout << error_json_line(where + ids.status().message()) << "\n";
        ++failures;
        continue;
      }
      std::cout << nlohmann::json{{"ids", *ids}}.dump() << "\n";
    }
  }
  return failures ? 1 : 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(tokenize_cmd, "tokenize",
                           "encode or decode JSON lines with a tokenizer.json", run_tokenize);
