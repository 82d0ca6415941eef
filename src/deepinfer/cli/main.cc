// deepinfer: one binary, many subcommands (generate, tokenize, recipe, make-tiny-model, ...).
#include <cstdio>
#include <cstring>
#include <string>

#include "deepinfer/cli/command_registry.h"

namespace {

void print_usage(FILE* out) {
  std::fprintf(out, "usage: deepinfer <command> [options]\n\ncommands:\n");
  for (const auto& [name, cmd] : deepinfer::cli::command_registry())
    std::fprintf(out, "  %-18s %s\n", name.c_str(), cmd.summary.c_str());
  std::fprintf(out, "\nRun 'deepinfer <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto& reg = deepinfer::cli::command_registry();
  auto it = reg.find(argv[1]);
  if (it == reg.end()) {
    std::fprintf(stderr, "deepinfer: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
  }
  return it->second.run(argc - 1, argv + 1);
}
