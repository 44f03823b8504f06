// Words for a remote shell (ssh and pdsh hand the command to `sh -c` on the far side): quoted
// (dsx/shell_quote.h), joined, and split as Python's shlex does.
#pragma once

#include <string>
#include <vector>

#include "dsx/shell_quote.h"

namespace dsx::launcher {

using dsx::shell_quote;

// The words quoted and joined by spaces.
std::string shell_join(const std::vector<std::string>& words);

// Splits like Python's shlex.split (POSIX mode): quotes, backslashes, whitespace. Used for
// --launcher_args. Throws dsx::Error(Usage) on an unterminated quote.
std::vector<std::string> shell_split(const std::string& text);

}  // namespace dsx::launcher
