// Assembles a node script (AWS user data, GCP startup script) from its pieces: a shebang, the
// cluster's settings as shell assignments, cloud/node/common.sh, and the cloud's own steps.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsx::cloud {

using ScriptSettings = std::vector<std::pair<std::string, std::string>>;

// `cloud_part` is the embedded path of the cloud's steps ("aws/user-data.sh"). With
// `strip_comments`, comment-only and blank lines are dropped (EC2's 16 KB user-data limit).
std::string render_node_script(std::string_view title, const ScriptSettings& settings,
                               std::string_view cloud_part, bool strip_comments);

// The `step NAME` lines of the cloud's steps, in order ("identity", "efa", ..., "ready"), with
// those of node/common.sh's join_cluster where the cloud part calls it.
std::vector<std::string> node_script_steps(std::string_view cloud_part);

// Shell comment lines for `up --dry-run`: what each node does after the calls, step by step.
std::string node_steps_comment(std::string_view cloud_part);

}  // namespace dsx::cloud
