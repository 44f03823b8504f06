// The subcommand table of the `dsx` binary. A subcommand is a function that receives the words
// after its name (argv[0] is "dsx <name>") and returns the process exit code. It parses its own
// options with Boost.Program_options (see cli.h) and answers --help.
#pragma once

#include <span>
#include <string>

namespace dsx::tools {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

// Every subcommand, in the order `dsx --help` lists them.
std::span<const Command> commands();

}  // namespace dsx::tools
