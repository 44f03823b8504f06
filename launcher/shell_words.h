// Words for a remote shell (ssh and pdsh hand the command to `sh -c` on the far side): joined,
// each quoted by dsx::shell_quote (dsx/shell_quote.h), and split as Python's shlex does.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

// The words quoted and joined by spaces.
std::string shell_join(const std::vector<std::string>& words);

// Splits like Python's shlex.split (POSIX mode): quotes, backslashes, whitespace. Used for
// --launcher_args. Throws dsx::Error(Usage) on an unterminated quote.
std::vector<std::string> shell_split(const std::string& text);

}  // namespace dsx::launcher
