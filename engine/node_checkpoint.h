// Checkpoints on nodes' own disks (DeepSpeed's checkpoint.use_node_local_storage, or any save
// directory the nodes do not share): each node keeps its ranks' files, and its lowest rank acts
// for it. A save commits in two phases across the nodes through the rendezvous store:
//   1. every node's leader checks its ranks' staged files (size and CRC32C) and reports;
//   2. only when every node has succeeded does rank 0 say "commit", and each leader installs its
//      part (its manifest, the tag directory, then `latest`); otherwise each drops its staging.
// A node that dies before phase 2 leaves every node's previous checkpoint in place. One that dies
// during phase 2 can leave the nodes' `latest` files apart; a resume then takes the newest
// checkpoint that every node holds (agree_on_resume), never a mix of two saves.
#pragma once

#include <chrono>
#include <string>

#include "comm/store/store.h"
#include "engine/node_layout.h"

namespace dsx::engine {

struct NodeCommit {
  comm::Store& store;
  std::string key;  // unique to this save; ranks' manifests are at key + "rank/<r>"
  int rank = 0;
  int world = 1;
  NodeLayout layout;
  std::chrono::milliseconds timeout;
};

// Whether every node sees rank 0's save directory: each leader leaves a probe file there under
// `key` and rank 0 looks for all of them. A collective of the leaders and rank 0.
bool save_directory_shared(const NodeCommit& c, const std::string& save_dir);

// Phase 1 and 2 above. `precheck` is rank 0's verdict before the files ("ok", or why the save
// must not commit, such as disagreeing tags). Returns "ok" or the reason, the same on every rank.
std::string commit_on_nodes(const NodeCommit& c, const std::string& save_dir,
                            const std::string& tag, const std::string& save_id, int64_t step,
                            const std::string& precheck);

// What a resume loads, agreed by every rank.
struct ResumePoint {
  bool found = false;  // false: no checkpoint anywhere yet, start from scratch
  std::string tag;
  std::string note;    // said by rank 0 when the nodes' `latest` files differed
};

// Each node's leader lists the checkpoints its `load_dir` holds; rank 0 picks the one every node
// has (the one `latest` names, or `tag` when given) and every rank learns it. Throws dsx::Error
// on every rank when no checkpoint is on every node, naming what each node holds.
ResumePoint agree_on_resume(const NodeCommit& c, const std::string& load_dir,
                            const std::string& tag);

// Test hook: DSX_CHECKPOINT_FAULT=<phase>@<node> kills this process (SIGKILL) when the leader
// of <node> reaches <phase> of a node-local save: write (its files written, not reported),
// verify (checked, not reported) or install (told to commit; killed 1 s later, not installed).
void checkpoint_fault_point(const char* phase, int node);

}  // namespace dsx::engine
