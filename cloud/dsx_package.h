// What `--dsx-package` may name: the node scripts install a .deb (cpack -G DEB) with apt, unpack
// a tarball of an installed tree (cpack -G TGZ), or build a tarball of dsx's sources on the node.
#pragma once

#include <string>

namespace dsx::cloud {

// Throws a usage error unless `url` is empty or a <storage_scheme> ("s3://", "gs://") or
// https:// URL of a .deb, .tar.gz or .tgz file.
void validate_dsx_package(const std::string& url, const std::string& storage_scheme);

}  // namespace dsx::cloud
