// The save side of node_checkpoint.h: the shared-directory probe and the two-phase commit.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "dsx/error.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/manifest.h"
#include "checkpoint/save.h"
#include "engine/node_checkpoint.h"

namespace dsx::engine {
namespace {

namespace ck = checkpoint;

constexpr const char* kError = "error:";

std::string node_key(const NodeCommit& c, const char* what, int node) {
  return c.key + what + "/" + std::to_string(node);
}

// A node's part of the save: its ranks' manifests from the store, checked on its disk.
// Returns "ok" or the reason it cannot commit.
std::string check_node_part(const NodeCommit& c, const std::string& save_dir,
                            ck::CheckpointManifest& part) {
  std::vector<ck::RankManifest> manifests;
  for (int r : c.layout.ranks_of(c.layout.node)) {
    const std::string value = c.store.get(c.key + "rank/" + std::to_string(r), c.timeout);
    if (value.starts_with(kError)) return "rank " + std::to_string(r) + ": " + value.substr(6);
    manifests.push_back(ck::RankManifest::from_json(value, "rank " + std::to_string(r) + "'s manifest"));
  }
  try {
    const ck::CheckpointManifest checked = ck::gather_manifest(part.tag, c.world, manifests);
    part.ranks = checked.ranks;
    ck::check_staged(save_dir, part);
  } catch (const Error& e) {
    return e.what();
  }
  return "ok";
}

// Rank 0: phase 1's verdict over every node, then "commit" or "abort:<why>".
std::string decide(const NodeCommit& c, const std::string& precheck) {
  std::string why = precheck == "ok" ? "" : precheck;
  for (int n = 0; n < c.layout.nodes; ++n) {
    const std::string result = c.store.get(node_key(c, "checked", n), c.timeout);
    if (why.empty() && result != "ok") why = "node " + std::to_string(n) + ": " + result;
  }
  return why.empty() ? "commit" : "abort:" + why;
}

// Rank 0, after "commit": every node's install, or the first that failed.
std::string installed_everywhere(const NodeCommit& c) {
  std::string outcome = "ok";
  for (int n = 0; n < c.layout.nodes; ++n) {
    const std::string result = c.store.get(node_key(c, "installed", n), c.timeout);
    if (outcome == "ok" && result != "ok")
      outcome = "node " + std::to_string(n) + " could not install its part (the other nodes did; a resume " +
                "takes the newest checkpoint every node holds): " + result;
  }
  return outcome;
}

}  // namespace

void checkpoint_fault_point(const char* phase, int node) {
  const char* fault = std::getenv("DSX_CHECKPOINT_FAULT");
  if (!fault || std::string(fault) != std::string(phase) + "@" + std::to_string(node)) return;
  // A node dying in its install while the others complete theirs: they are given the time to.
  if (std::string(phase) == "install") std::this_thread::sleep_for(std::chrono::seconds(1));
  ::kill(::getpid(), SIGKILL);
}

bool save_directory_shared(const NodeCommit& c, const std::string& save_dir) {
  const auto probe = [&](int node) {
    return save_dir + "/.dsx-node-probe-" + std::to_string(node) + "-" + std::to_string(std::hash<std::string>{}(c.key));
  };
  const bool leader = c.layout.leads(c.rank);
  if (leader) {
    ck::make_directories(save_dir);
    ck::write_file_durably(probe(c.layout.node), c.key);
    c.store.set(node_key(c, "probe", c.layout.node), "written");
  }
  if (c.rank == 0) {
    std::string seen = "shared";
    for (int n = 0; n < c.layout.nodes; ++n) {
      c.store.get(node_key(c, "probe", n), c.timeout);
      if (!std::filesystem::exists(probe(n))) seen = "not shared";
    }
    c.store.set(c.key + "probe/verdict", seen);
  }
  const bool shared = c.store.get(c.key + "probe/verdict", c.timeout) == "shared";
  if (leader) {
    std::error_code ec;
    std::filesystem::remove(probe(c.layout.node), ec);
  }
  return shared;
}

std::string commit_on_nodes(const NodeCommit& c, const std::string& save_dir, const std::string& tag,
                            const std::string& save_id, int64_t step, const std::string& precheck) {
  const bool leader = c.layout.leads(c.rank);
  const int node = c.layout.node;
  ck::CheckpointManifest part;
  part.tag = tag;
  part.world_size = c.world;
  part.node = ck::NodePart{node, c.layout.nodes};
  part.save_id = save_id;
  part.step = step;
  if (leader) {
    const std::string checked = check_node_part(c, save_dir, part);
    checkpoint_fault_point("verify", node);
    c.store.set(node_key(c, "checked", node), checked);
  }
  if (c.rank == 0) c.store.set(c.key + "decision", decide(c, precheck));
  const std::string decision = c.store.get(c.key + "decision", c.timeout);
  if (leader) {
    if (decision == "commit") {
      checkpoint_fault_point("install", node);
      std::string installed = "ok";
      try {
        ck::install_staged(save_dir, part);
      } catch (const Error& e) {
        installed = e.what();
      }
      c.store.set(node_key(c, "installed", node), installed);
    } else {
      ck::abandon_staged(save_dir, tag);
    }
  }
  if (c.rank == 0) c.store.set(c.key + "outcome", decision == "commit" ? installed_everywhere(c) : decision.substr(6));
  return c.store.get(c.key + "outcome", c.timeout);
}

}  // namespace dsx::engine
