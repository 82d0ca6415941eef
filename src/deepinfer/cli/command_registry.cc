#include "deepinfer/cli/command_registry.h"

#include <cstdio>

namespace deepinfer::cli {

std::map<std::string, Command>& command_registry() {
  static std::map<std::string, Command> registry;
  return registry;
}

int command_failed(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "deepinfer %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

int command_failed(const std::string& command, const Status& status) {
  return command_failed(command, status.to_string());
}

CommandRegistrar::CommandRegistrar(Command c) {
  std::string name = c.name;
  command_registry().emplace(std::move(name), std::move(c));
}

}  // namespace deepinfer::cli
