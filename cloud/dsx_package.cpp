#include "cloud/dsx_package.h"

#include <string_view>

#include "dsx/error.h"

namespace dsx::cloud {

void validate_dsx_package(const std::string& url, const std::string& storage_scheme) {
  if (url.empty()) return;
  const std::string_view u(url);
  const bool where = u.starts_with(storage_scheme) || u.starts_with("https://");
  const bool what = u.ends_with(".deb") || u.ends_with(".tar.gz") || u.ends_with(".tgz");
  if (where && what) return;
  throw Error(ErrorKind::Usage,
              "--dsx-package must be a " + storage_scheme + " or https:// URL of a dsx .deb (cpack -G DEB), "
              "or a .tar.gz of an installed dsx (cpack -G TGZ) or of its sources (git archive); got '" +
                  url + "'");
}

}  // namespace dsx::cloud
