// Checks of the flags both clouds share (see cluster_flags.h).
#include "cloud/cluster_flags.h"

#include "dsx/error.h"

namespace dsx::cloud {

void validate_cluster_name(const std::string& name) {
  bool ok =
      !name.empty() && name.size() <= 40 && name[0] >= 'a' && name[0] <= 'z' && name.back() != '-';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (!ok) {
    throw Error(ErrorKind::Usage, "--cluster '" + name +
                                      "' is not a usable name: use 1-40 lower-case letters, digits and '-', starting "
                                      "with a letter (it names every cloud resource, e.g. dsx-" +
                                      name + ")");
  }
}

void validate_shared_dir(const std::string& path) {
  if (!(path.size() > 1 && path[0] == '/' && path.find_first_of(" \t'\"\\$`") == std::string::npos)) {
    throw Error(ErrorKind::Usage,
                "--shared-dir must be an absolute path (not /) without spaces or quotes, got '" + path + "'");
  }
}

}  // namespace dsx::cloud
