// The flags `dsx cloud aws ...` and `dsx cloud gcp ...` share and check alike: --cluster (it names
// every resource of either cloud) and --shared-dir (where the node scripts mount shared storage).
#pragma once

#include <string>

namespace dsx::cloud {

// A cluster name usable in every AWS and GCP resource name; throws dsx::Error(Usage) otherwise.
void validate_cluster_name(const std::string& name);
// --shared-dir: an absolute path the node scripts can use unquoted in fstab; throws otherwise.
void validate_shared_dir(const std::string& path);

}  // namespace dsx::cloud
