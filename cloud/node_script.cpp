// Node script assembly. Settings become `DSX_NAME='value'` lines above the shared steps, so the
// scripts under cloud/ stay plain bash that shellcheck reads as it is.
#include "cloud/node_script.h"

#include <map>
#include <sstream>

#include "cloud/embedded_files.h"
#include "dsx/shell_quote.h"

namespace dsx::cloud {

namespace {

// Drops lines that hold only a comment or nothing. A heredoc body is kept as it is.
std::string without_comments(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string out, line, heredoc_end;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(" \t");
    bool blank = first == std::string::npos;
    if (heredoc_end.empty() && (blank || line[first] == '#')) continue;
    if (!heredoc_end.empty() && line == heredoc_end) heredoc_end.clear();
    size_t marker = line.find("<<");
    if (heredoc_end.empty() && marker != std::string::npos &&
        line.find("<<<") == std::string::npos) {
      size_t begin = line.find_first_not_of(" -'\"", marker + 2);
      size_t end = line.find_first_of(" '\"", begin);
      heredoc_end = line.substr(begin, end == std::string::npos ? end : end - begin);
    }
    out += line + "\n";
  }
  return out;
}

// The NAME of a `step NAME` line (indented or not); empty for any other line.
std::string step_name(const std::string& line) {
  const size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos || line.compare(at, 5, "step ") != 0) return "";
  return line.substr(at + 5, line.find_first_of(" \t#", at + 5) - at - 5);
}

// The steps each shell function of `script` takes ("name() {" at the start of a line to "}"),
// for the functions that take any.
std::map<std::string, std::vector<std::string>> function_steps(std::string_view script) {
  std::map<std::string, std::vector<std::string>> steps;
  std::istringstream in{std::string(script)};
  std::string function;
  for (std::string line; std::getline(in, line);) {
    if (function.empty()) {
      if (line.ends_with("() {") && line.find(' ') == line.size() - 2) function = line.substr(0, line.size() - 4);
    } else if (line == "}") {
      function.clear();
    } else if (std::string name = step_name(line); !name.empty()) {
      steps[function].push_back(name);
    }
  }
  return steps;
}

}  // namespace

std::string render_node_script(std::string_view title, const ScriptSettings& settings,
                               std::string_view cloud_part, bool strip_comments) {
  std::string out = "#!/bin/bash\n# " + std::string(title) +
                    "\n# Rendered by dsx cloud; the log is /var/log/dsx-node-setup.log.\n";
  for (const auto& [name, value] : settings) out += name + "=" + shell_quote(value) + "\n";
  std::string body =
      std::string(embedded_file("node/common.sh")) + "\n" +
      std::string(embedded_file("node/health.sh")) + "\n" + std::string(embedded_file(cloud_part));
  return out + (strip_comments ? without_comments(body) : body);
}

std::vector<std::string> node_script_steps(std::string_view cloud_part) {
  // The cloud part's own steps, and where it calls a function of node/common.sh that takes steps
  // (join_cluster), that function's.
  const auto common = function_steps(embedded_file("node/common.sh"));
  std::vector<std::string> steps;
  std::istringstream in{std::string(embedded_file(cloud_part))};
  for (std::string line; std::getline(in, line);) {
    if (std::string name = step_name(line); !name.empty()) {
      steps.push_back(name);
    } else if (auto called = common.find(line.substr(0, line.find(' '))); called != common.end()) {
      steps.insert(steps.end(), called->second.begin(), called->second.end());
    }
  }
  return steps;
}

std::string node_steps_comment(std::string_view cloud_part) {
  std::string names;
  for (const auto& step : node_script_steps(cloud_part)) names += (names.empty() ? "" : ", ") + step;
  return "# Then each node runs its set-up script (" + std::string(cloud_part) +
         ") at first boot, in steps:\n#   " + names +
         "\n# storage mounts --storage at --shared-dir; report is dsx report --check in the ranks'\n"
         "# environment; health runs dsx bench comm over all nodes, then in pairs, and fails a slow\n"
         "# node before any hostfile is written; a failed step tags the node dsx-ready=failed-<step>.\n";
}

}  // namespace dsx::cloud
