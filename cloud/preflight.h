// Pre-flight: what up learns from read-only CLI calls before it creates anything, judged in C++.
// A finding is an error (up stops before the first create, listing every error with what to
// change) or a warning (printed, up goes on).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cloud/plan.h"

namespace dsx::cloud {

struct Finding {
  bool error;
  std::string text;  // what is wrong and what to change
};

// A read-only pre-flight call capturing its output in `capture`. It may fail: the check judges
// a missing answer and says what to change.
Step preflight_step(std::string what, std::vector<std::string> argv, std::string capture);

// The captured value, or "" when the call failed or was skipped.
std::string captured(const Vars& vars, const std::string& name);

// Prints the warnings to `warn`; throws dsx::Error(Config) with every error when there is one.
void report_findings(const std::vector<Finding>& findings, std::ostream& warn);

}  // namespace dsx::cloud
