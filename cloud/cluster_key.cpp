// Cluster key creation through ssh-keygen; an existing key is reused so that renders agree.
#include "cloud/cluster_key.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cloud/plan.h"
#include "dsx/error.h"

namespace dsx::cloud {

std::string ensure_cluster_key(const std::string& dir, const std::string& comment) {
  namespace fs = std::filesystem;
  const std::string key = dir + "/cluster_key";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot create " + dir + ": " + ec.message());
  if (!fs::exists(key)) {
    Step keygen{"make the cluster SSH key " + key,
                {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key}};
    keygen.quiet = true;
    Plan plan{"cluster key", {keygen}};
    std::ostringstream quiet;
    execute_plan(plan, quiet);
  }
  std::ifstream in(key + ".pub");
  std::string line;
  if (!std::getline(in, line) || line.rfind("ssh-", 0) != 0) {
    throw Error(ErrorKind::Io, key + ".pub is missing or not an SSH public key: delete " + key +
                                   " and render again to make a new pair");
  }
  return line;
}

}  // namespace dsx::cloud
