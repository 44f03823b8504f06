// A directory checked for writing before any training time is spent on it (--save, ...).
#pragma once

#include <string>

namespace dsx::engine {

// Creates `dir` if need be and writes and removes a file there; Error(Io) naming `flag`, the
// directory and the reason when that fails.
void require_writable_directory(const std::string& dir, const std::string& flag);

}  // namespace dsx::engine
