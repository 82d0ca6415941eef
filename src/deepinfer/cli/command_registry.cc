#include "deepinfer/cli/command_registry.h"

namespace deepinfer::cli {

std::map<std::string, Command>& command_registry() {
  static std::map<std::string, Command> registry;
  return registry;
}

CommandRegistrar::CommandRegistrar(Command c) {
  std::string name = c.name;
  command_registry().emplace(std::move(name), std::move(c));
}

}  // namespace deepinfer::cli
