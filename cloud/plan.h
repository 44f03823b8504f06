// A cloud plan: the ordered CLI calls (aws, gcloud) that bring a cluster up or down. A later
// call may use what an earlier one printed (`${SG_ID}` after create-security-group), so a plan
// is data that can be printed as a bash script (--dry-run), executed, or checked by tests.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace dsx::cloud {

using Vars = std::map<std::string, std::string>;

struct Step {
  Step(std::string what_, std::vector<std::string> argv_, std::string capture_ = "")
      : what(std::move(what_)), argv(std::move(argv_)), capture(std::move(capture_)) {}

  std::string what;               // one line for the user: what this call does
  std::vector<std::string> argv;  // words may contain ${NAME} of an earlier capture
  std::string capture;            // store trimmed stdout under this name ("" = show stdout)
  bool capture_is_list = false;   // the capture is a list: a word that is exactly ${NAME}
                                  // becomes one word per item (none when empty)
  bool quiet = false;             // discard stdout (the CLI echoes what it created)
  bool may_fail = false;          // tear-down: the resource may already be gone
  std::string skip_if_empty;      // skip when this variable is empty (nothing to act on)
  // When set, write `fill_to` from `fill_from` with ${NAME}s replaced before the call runs.
  std::string fill_from, fill_to;
  int timeout_s = 300;  // with `until`: for all the calls together
  // When set, the call is repeated every `poll_s` seconds (DSX_CLOUD_POLL_S overrides it) until
  // its trimmed stdout is this value (a resource that becomes AVAILABLE), at most timeout_s.
  // up and the printed script run the same wait (print_plan writes it as a call of dsx_wait).
  std::string until;
  std::vector<std::string> fail_states;  // ... but stop the plan at once on one of these (FAILED)
  int poll_s = 15;
  // A read-only check that the printed script makes too: when the call fails, or prints
  // something else than `expect` (when set), the plan stops with dsx::Error(Config) `refusal`,
  // which says what is wrong and what to do (nothing was created yet).
  std::string expect;
  std::string refusal;
  // Run after the step (and its capture), with every variable captured so far; throws to stop
  // the plan (pre-flight checks). `check_what` is the line print_plan shows for it.
  std::function<void(const Vars&)> check;
  std::string check_what;
};

struct Plan {
  std::string title;
  std::vector<Step> steps;
};

// The words of `step` with ${NAME}s replaced from `vars`; `lists` names the list captures.
// Unknown names throw dsx::Error(Internal).
std::vector<std::string> resolve_argv(const Step& step, const Vars& vars,
                                      const std::vector<std::string>& lists = {});

// The names of the plan's list captures.
std::vector<std::string> list_captures(const Plan& plan);

// `text` with every ${NAME} that `vars` defines replaced.
std::string fill_vars(const std::string& text, const Vars& vars);

// Prints the plan as a bash script a user can read or run by hand.
void print_plan(std::ostream& out, const Plan& plan);

// Runs every step with a timeout each, echoing `what` to `log`. A step that fails stops the plan
// with dsx::Error(Launch) naming the step, unless it may fail. Returns the captured variables.
Vars execute_plan(const Plan& plan, std::ostream& log, Vars vars = {});

}  // namespace dsx::cloud
