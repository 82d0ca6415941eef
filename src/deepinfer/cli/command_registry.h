// Subcommand registry: each cli/commands/*_command.cc registers itself, so adding a command
// touches no shared file.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::cli {

struct Command {
  std::string name;
  std::string summary;
  // argv[0] is the subcommand name; returns the process exit code.
  std::function<int(int argc, char** argv)> run;
};

std::map<std::string, Command>& command_registry();

// Prints "deepinfer COMMAND: MESSAGE" on stderr; returns the exit code 1.
int command_failed(const std::string& command, const std::string& message);
int command_failed(const std::string& command, const Status& status);  // its to_string()

struct CommandRegistrar {
  explicit CommandRegistrar(Command c);
};

}  // namespace deepinfer::cli

#define DEEPINFER_REGISTER_COMMAND(var, name, summary, fn) \
  static ::deepinfer::cli::CommandRegistrar var({name, summary, fn})
