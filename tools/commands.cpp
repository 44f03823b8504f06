// The list of subcommands. Add a line here when you add a tools/cmd_<name>.cpp.
#include "tools/command.h"

#include <array>

namespace dsx::tools {

int run_version(int argc, char** argv);

std::span<const Command> commands() {
  static const std::array table = {
      Command{"version", "print the dsx version and build options", run_version},
  };
  return table;
}

}  // namespace dsx::tools
