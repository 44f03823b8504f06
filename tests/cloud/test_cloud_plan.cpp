// Plans: ${NAME} resolution, list captures, the printed bash script, and execution of real
// processes (captures, skips, tolerated failures, a call that hangs past its timeout).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cloud/plan.h"
#include "dsx/error.h"
#include "tests/cloud/temp_dir.h"
#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using namespace dsx::cloud;

TEST(CloudPlan, ResolvesCapturesAndSplitsLists) {
  Step step{"terminate",
            {"aws", "ec2", "terminate-instances", "--instance-ids", "${IDS}", "--group=${SG}x"}};
  Vars vars = {{"IDS", "i-1 i-2\ti-3"}, {"SG", "sg-9"}};
  EXPECT_EQ(resolve_argv(step, vars, {"IDS"}),
            (std::vector<std::string>{"aws", "ec2", "terminate-instances", "--instance-ids", "i-1",
                                      "i-2", "i-3", "--group=sg-9x"}));
  // Not a list: the value stays one word, spaces and all.
  EXPECT_EQ(resolve_argv(step, vars, {})[4], "i-1 i-2\ti-3");
  // An empty list (or the CLI's "None") is no words at all.
  EXPECT_EQ(resolve_argv(step, {{"IDS", "None"}, {"SG", ""}}, {"IDS"}).size(), 5u);
  EXPECT_THROW(resolve_argv(step, {{"IDS", "i-1"}}, {"IDS"}), dsx::Error)
      << "SG was never captured";
  EXPECT_EQ(fill_vars("{\"Groups\": [\"${SG}\"], \"x\": \"${OTHER}\"}", vars),
            "{\"Groups\": [\"sg-9\"], \"x\": \"${OTHER}\"}");
}

TEST(CloudPlan, PrintedScriptIsBashThatQuotesEveryWord) {
  Plan plan{"test plan", {}};
  plan.steps.push_back(
      {"make a group", {"aws", "ec2", "create", "--description", "it's a \"test\""}, "SG"});
  plan.steps.push_back(
      {"list", {"aws", "ec2", "list", "--query", "Reservations[].Instances[].Id"}, "IDS"});
  plan.steps.back().capture_is_list = true;
  Step use{"use them",
           {"aws", "ec2", "use", "--ids", "${IDS}", "--group", "${SG}", "--v", "Version=$Latest"}};
  use.skip_if_empty = "IDS";
  use.may_fail = true;
  plan.steps.push_back(use);
  std::ostringstream out;
  print_plan(out, plan);
  const std::string script = out.str();
  EXPECT_CONTAINS(script, "SG=$(aws ec2 create --description 'it'\\''s a \"test\"')");
  EXPECT_CONTAINS(script, "if [[ -n \"${IDS}\" && \"${IDS}\" != None ]]; then");
  EXPECT_CONTAINS(script,
                  "  aws ec2 use --ids ${IDS} --group \"${SG}\" --v \"Version=\\$Latest\" || true");
  // The script runs: with `aws` a stand-in that prints its arguments one per line.
  dsx::test::TempDir dir;
  dsx::test::write_text(dir / "bin/aws",
                        "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done >> \"$LOG\"\necho a b\n",
                        true);
  dsx::test::write_text(dir / "plan.sh", script);
  auto r = dsx::test::run_command("env PATH=" + dir / "bin" +
                                  ":/usr/bin:/bin LOG=" + dir / "log bash " + dir / "plan.sh");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string log = dsx::test::read_text(dir / "log");
  EXPECT_CONTAINS(log, "it's a \"test\"\n");
  EXPECT_CONTAINS(log, "--ids\na\nb\n--group\na b\n--v\nVersion=$Latest\n");
}

TEST(CloudPlan, ExecutesCapturesSkipsAndToleratedFailures) {
  Plan plan{"run", {}};
  plan.steps.push_back({"echo", {"sh", "-c", "echo '  hello  '"}, "GREETING"});
  plan.steps.push_back({"nothing", {"sh", "-c", "true"}, "EMPTY"});
  Step skipped{"skipped", {"sh", "-c", "exit 3"}};
  skipped.skip_if_empty = "EMPTY";
  plan.steps.push_back(skipped);
  Step tolerated{"tolerated", {"sh", "-c", "exit 4"}};
  tolerated.may_fail = true;
  plan.steps.push_back(tolerated);
  plan.steps.push_back(
      {"uses it", {"sh", "-c", "test \"$0\" = hello && echo ok", "${GREETING}"}, "RESULT"});
  std::ostringstream log;
  auto vars = execute_plan(plan, log);
  EXPECT_EQ(vars.at("GREETING"), "hello");
  EXPECT_EQ(vars.at("RESULT"), "ok");
  EXPECT_CONTAINS(log.str(), "-- skipped (nothing to do): skipped");
  EXPECT_CONTAINS(log.str(), "(failed with exit code 4; continuing)");

  Plan failing{"fail",
               {Step{"the failing step", {"sh", "-c", "exit 7"}}, Step{"never", {"false"}}}};
  try {
    execute_plan(failing, log);
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Launch);
    EXPECT_NE(std::string(e.what()).find("step 'the failing step' failed: sh exited with 7"),
              std::string::npos);
  }
  Plan missing{"missing", {Step{"a tool that is not there", {"dsx-no-such-tool-here"}}}};
  EXPECT_THROW(execute_plan(missing, log), dsx::Error);
}

TEST(CloudPlan, ACallPastItsTimeoutIsStoppedAndReaped) {
  dsx::test::TempDir dir;
  for (bool capture : {false, true}) {
    Step hang{
        "hang", {"sh", "-c", "echo $$ > " + dir / "pid" + "; exec sleep 30"}, capture ? "OUT" : ""};
    hang.timeout_s = 1;
    auto start = std::chrono::steady_clock::now();
    std::ostringstream log;
    try {
      execute_plan(Plan{"hang", {hang}}, log);
      FAIL() << "expected a timeout";
    } catch (const dsx::Error& e) {
      EXPECT_EQ(e.kind(), dsx::ErrorKind::Timeout);
      EXPECT_NE(std::string(e.what()).find("did not finish within 1 s"), std::string::npos);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    pid_t pid = std::stoi(dsx::test::read_text(dir / "pid"));
    EXPECT_NE(kill(pid, 0), 0) << "the stopped call is gone";
  }
}

// A polling step calls again until the resource reports the wanted state, stops at once on the
// failure state, and the printed script loops the same way.
TEST(CloudPlan, PollingStepWaitsForTheStateAndStopsOnFailure) {
  dsx::test::TempDir dir;
  // Prints CREATING twice, then the state in $FINAL.
  dsx::test::write_text(dir / "state",
                        "#!/bin/sh\nn=$(cat \"$0.n\" 2>/dev/null || echo 0); n=$((n + 1))\n"
                        "echo $n > \"$0.n\"\n[ $n -le 2 ] && echo CREATING || echo \"$FINAL\"\n",
                        true);
  setenv("DSX_CLOUD_POLL_S", "0", 1);
  Step wait{"wait for it", {dir / "state"}};
  wait.until = "AVAILABLE";
  wait.fail_states = {"FAILED", "DELETING"};
  wait.timeout_s = 20;
  Plan plan{"poll", {wait}};
  std::ostringstream log;
  setenv("FINAL", "AVAILABLE", 1);
  EXPECT_NO_THROW(execute_plan(plan, log));
  EXPECT_EQ(dsx::test::read_text(dir / "state.n"), "3\n");

  std::filesystem::remove(dir / "state.n");
  setenv("FINAL", "FAILED", 1);
  try {
    execute_plan(plan, log);
    ADD_FAILURE() << "FAILED must stop the plan";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'wait for it': the cloud reports FAILED"),
              std::string::npos)
        << e.what();
  }

  std::filesystem::remove(dir / "state.n");
  setenv("FINAL", "CREATING", 1);
  plan.steps[0].timeout_s = 1;
  try {
    execute_plan(plan, log);
    ADD_FAILURE() << "a state that never comes must time out";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Timeout);
    EXPECT_NE(std::string(e.what()).find("still 'CREATING' after 1 s, not 'AVAILABLE'"),
              std::string::npos)
        << e.what();
  }

  std::filesystem::remove(dir / "state.n");
  setenv("FINAL", "AVAILABLE", 1);
  plan.steps[0].poll_s = 0;
  plan.steps[0].timeout_s = 20;
  std::ostringstream script;
  print_plan(script, plan);
  dsx::test::write_text(dir / "poll.sh", script.str(), true);
  auto r = dsx::test::run_command("bash " + dir / "poll.sh");
  EXPECT_EQ(r.exit_code, 0) << script.str() << r.output;
  EXPECT_EQ(dsx::test::read_text(dir / "state.n"), "3\n") << script.str();
  // The script stops on a failure state at once, with up's message.
  std::filesystem::remove(dir / "state.n");
  r = dsx::test::run_command("FINAL=DELETING bash " + dir / "poll.sh");
  EXPECT_EQ(r.exit_code, 1) << script.str() << r.output;
  EXPECT_CONTAINS(r.output,
                  "error: step 'wait for it': the cloud reports DELETING; see why in its "
                  "console, then run down and up again");
  EXPECT_EQ(dsx::test::read_text(dir / "state.n"), "3\n") << "no call after the failure state";
  unsetenv("DSX_CLOUD_POLL_S");
  unsetenv("FINAL");
}

// A check runs after its step with what was captured, and its exception stops the plan there.
TEST(CloudPlan, CheckSeesTheCapturesAndStopsThePlan) {
  Step probe{"probe", {"/bin/echo", "p5.48xlarge"}, "TYPE"};
  probe.check = [](const Vars& vars) {
    if (vars.at("TYPE") != "p4d.24xlarge") throw dsx::Error(dsx::ErrorKind::Config, "wrong type");
  };
  probe.check_what = "the type is p4d";
  dsx::test::TempDir dir;
  Plan plan{"check", {probe, Step{"never", {"/usr/bin/touch", dir / "ran"}}}};
  std::ostringstream log;
  EXPECT_THROW(execute_plan(plan, log), dsx::Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "ran"));
  std::ostringstream script;
  print_plan(script, plan);
  EXPECT_NE(script.str().find("# dsx then checks: the type is p4d\n"), std::string::npos);
}
