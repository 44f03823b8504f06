// Writing rendered files: whole or not at all (temp file, fsync, rename), with a file mode.
#pragma once

#include <string>

namespace dsx::cloud {

// Creates the parent directories. Throws dsx::Error(Io) naming the path and the reason.
void write_file_atomically(const std::string& path, const std::string& text, unsigned mode = 0644);

// `text` with every {{name}} replaced by `value`.
std::string replace_placeholder(std::string text, const std::string& name,
                                const std::string& value);

}  // namespace dsx::cloud
