// Reporting pre-flight findings.
#include "cloud/preflight.h"

#include "dsx/error.h"

namespace dsx::cloud {

Step preflight_step(std::string what, std::vector<std::string> argv, std::string capture) {
  Step step{"pre-flight: " + std::move(what), std::move(argv), std::move(capture)};
  step.may_fail = true;
  return step;
}

std::string captured(const Vars& vars, const std::string& name) {
  auto it = vars.find(name);
  return it == vars.end() ? std::string() : it->second;
}

void report_findings(const std::vector<Finding>& findings, std::ostream& warn) {
  std::string errors;
  int count = 0;
  for (const auto& f : findings) {
    if (!f.error) warn << "dsx: pre-flight warning: " << f.text << "\n";
    if (f.error) errors += "\n  - " + f.text;
    count += f.error;
  }
  if (count > 0) {
    throw Error(ErrorKind::Config, "pre-flight found " + std::to_string(count) +
                                       " problem(s); nothing was created:" + errors);
  }
}

}  // namespace dsx::cloud
