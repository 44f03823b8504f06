// The scripts and templates under cloud/ (aws/, gcp/, node/, slurm/), compiled into the binary
// so that `dsx cloud` works from the build tree and when installed, without a data directory.
#pragma once

#include <string_view>

namespace dsx::cloud {

// The file's text, by its path relative to cloud/ ("aws/user-data.sh"). Throws
// dsx::Error(Internal) for a name that was not embedded.
std::string_view embedded_file(std::string_view path);

}  // namespace dsx::cloud
