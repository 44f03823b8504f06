// Quoting words for a POSIX shell, for the scripts dsx prints and renders.
#pragma once

#include <string>
#include <string_view>

namespace dsx::cloud {

// `word` as one shell word: unchanged when it holds only safe characters, else single-quoted.
std::string shell_quote(std::string_view word);

}  // namespace dsx::cloud
