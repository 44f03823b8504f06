// The cluster's SSH key pair: every node trusts the public half (in its node script) and fetches
// the private half from the cloud's secret store, so any node can start ranks on the others.
#pragma once

#include <string>

namespace dsx::cloud {

// Makes <dir>/cluster_key and cluster_key.pub with ssh-keygen (ed25519, no passphrase) unless
// they exist; returns the public key line. Throws dsx::Error(Io/Unsupported) with what to do.
std::string ensure_cluster_key(const std::string& dir, const std::string& comment);

}  // namespace dsx::cloud
