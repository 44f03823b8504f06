// The checks `dsx report` runs on an Environment: common causes of hangs at init, slow
// multi-node runs and crashes in multi-GPU setups, each with advice. Pure functions of the
// snapshot, so each can be tested on a made-up machine.
#pragma once

#include <string>
#include <vector>

#include "tools/report/environment.h"

namespace dsx::report {

enum class Severity { Info, Warning, Error };
const char* to_string(Severity severity);

struct Finding {
  Severity severity = Severity::Info;
  std::string id;       // stable name for scripts: "socket-ifname", "no-nvlink", ...
  std::string message;  // what is wrong
  std::string advice;   // what to do
};

std::vector<Finding> run_checks(const Environment& env);

// The interfaces an NCCL-style list selects: comma-separated prefixes, "=" for exact names,
// a leading "^" to exclude instead of include.
std::vector<std::string> select_interfaces(const std::string& spec,
                                           const std::vector<std::string>& interfaces);

}  // namespace dsx::report
