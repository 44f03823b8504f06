// Quoting words for a remote shell (ssh and pdsh hand the command to `sh -c` on the far side).
// Single quotes with '\'' for embedded quotes: no value or argument can inject a command.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

// `word` unchanged when it only has [A-Za-z0-9_@%+=:,./-] (and is not empty), else single-quoted.
std::string shell_quote(const std::string& word);

// The words quoted and joined by spaces.
std::string shell_join(const std::vector<std::string>& words);

// Splits like Python's shlex.split (POSIX mode): quotes, backslashes, whitespace. Used for
// --launcher_args. Throws dsx::Error(Usage) on an unterminated quote.
std::vector<std::string> shell_split(const std::string& text);

}  // namespace dsx::launcher
