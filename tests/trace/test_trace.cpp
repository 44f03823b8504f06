// The span recorder, torch.profiler's schedule and the Chrome trace file, as a viewer reads it.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "dsx/error.h"
#include "trace/chrome_trace.h"
#include "trace/recorder.h"
#include "trace/schedule.h"
#include "trace/trace.h"

namespace dsx::trace {
namespace {

// Each test starts with an empty, stopped recorder.
class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Recorder::instance().stop();
    Recorder::instance().clear();
    Recorder::instance().set_capacity(200000);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(TraceTest, NothingIsRecordedWhileStopped) {
  { Scope s("forward", "phase"); }
  span("x", "phase", Clock::now(), Clock::now());
  EXPECT_TRUE(Recorder::instance().events().empty());
}

TEST_F(TraceTest, ScopesRecordNamesCategoriesAndNesting) {
  Recorder::instance().start();
  {
    Scope outer(kStepName, 7, kStepCategory);
    Scope inner("backward layer", 3, "layer");
    inner.add({"bytes", 4096.0});
  }
  Recorder::instance().stop();
  const auto events = Recorder::instance().events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "backward layer 3");  // the inner one ends first
  EXPECT_STREQ(events[0].category, "layer");
  EXPECT_EQ(events[1].name, "ProfilerStep#7");  // torch.profiler's name, no space
  EXPECT_LE(events[1].begin_ns, events[0].begin_ns);
  EXPECT_GE(events[1].end_ns, events[0].end_ns);
  EXPECT_EQ(events[0].track, events[1].track);
  ASSERT_EQ(events[0].args.size(), 1u);
  EXPECT_EQ(events[0].args[0].number, 4096.0);
}

TEST_F(TraceTest, EachThreadHasItsOwnNamedTrackAndNamedTracksAreShared) {
  Recorder::instance().start();
  name_this_thread("training");
  { Scope s("a", "phase"); }
  std::thread([] {
    name_this_thread("comm progress");
    Scope s("b", "progress");
  }).join();
  EXPECT_EQ(track("gradient reductions"), track("gradient reductions"));
  Recorder::instance().stop();
  const auto events = Recorder::instance().events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NE(events[0].track, events[1].track);
  auto name_of = [](int id) {
    for (const auto& t : Recorder::instance().tracks())
      if (t.id == id) return t.name;
    return std::string("?");
  };
  EXPECT_EQ(name_of(events[0].track), "training");
  EXPECT_EQ(name_of(events[1].track), "comm progress");
  EXPECT_EQ(name_of(track("gradient reductions")), "gradient reductions");
}

TEST_F(TraceTest, TheBufferIsBoundedAndCountsWhatItDropped) {
  Recorder::instance().set_capacity(10);
  Recorder::instance().start();
  for (int i = 0; i < 25; ++i) Scope s("x", i, "layer");
  Recorder::instance().stop();
  EXPECT_EQ(Recorder::instance().events().size(), 10u);
  EXPECT_EQ(Recorder::instance().dropped(), 15u);
}

TEST(ProfileSchedule, FollowsTorchProfilerWaitWarmupActiveRepeat) {
  const ProfileSchedule s = parse_profile_schedule("1,2,3,2");
  const StepAction W = StepAction::Warmup, S = StepAction::Skip, R = StepAction::Record,
                   X = StepAction::RecordAndSave;
  const std::vector<StepAction> want = {S, W, W, R, R, X, S, W, W, R, R, X, S, S, S};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(step_action(s, static_cast<int64_t>(i)), want[i]) << i;
  // repeat 0: cycles until the run ends; three numbers: one cycle
  const ProfileSchedule forever = parse_profile_schedule("0,0,2,0");
  EXPECT_EQ(step_action(forever, 1001), StepAction::RecordAndSave);
  EXPECT_EQ(step_action(forever, 1000), StepAction::Record);
  EXPECT_EQ(parse_profile_schedule("5,1,3").repeat, 1);
}

TEST(ProfileSchedule, BadTextNamesTheFlagAndThePart) {
  for (const char* bad : {"1,1", "1,1,0", "a,1,3", "1,,3", "1,1,3,1,1", "-1,1,3", "1,1,3x"}) {
    try {
      parse_profile_schedule(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find("--profile_schedule"), std::string::npos) << e.what();
    }
  }
}

TEST_F(TraceTest, TheFileIsChromeTraceJsonWithRankAsProcessAndTracksAsThreads) {
  Recorder::instance().start();
  name_this_thread("training");
  const auto t0 = Clock::now();
  span("quote \" and \\ and \n", "phase", t0, t0 + std::chrono::microseconds(1500), {{"route", "allreduce"}});
  Recorder::instance().stop();
  TraceFileInfo info;
  info.rank = 3;
  info.world_size = 4;
  info.origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count() - 1000000;
  info.clock_offset_us = 12.5;
  const std::string path = (std::filesystem::temp_directory_path() / "dsx_test_trace.json").string();
  write_chrome_trace(path, Recorder::instance().events(), Recorder::instance().tracks(), info);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(text.str().c_str()).HasParseError()) << text.str();
  const auto& events = doc["traceEvents"];
  bool saw_span = false, saw_thread_name = false, saw_process_name = false;
  for (const auto& e : events.GetArray()) {
    EXPECT_EQ(e["pid"].GetInt(), 3);
    const std::string ph = e["ph"].GetString();
    if (ph == "X") {
      saw_span = true;
      EXPECT_EQ(std::string(e["name"].GetString()), "quote \" and \\ and \n");
      EXPECT_NEAR(e["ts"].GetDouble(), 1000.0, 0.01);  // µs after the origin
      EXPECT_NEAR(e["dur"].GetDouble(), 1500.0, 0.01);
      EXPECT_EQ(std::string(e["args"]["route"].GetString()), "allreduce");
    } else if (ph == "M" && std::string(e["name"].GetString()) == "thread_name") {
      saw_thread_name = saw_thread_name || std::string(e["args"]["name"].GetString()) == "training";
    } else if (ph == "M" && std::string(e["name"].GetString()) == "process_name") {
      saw_process_name = std::string(e["args"]["name"].GetString()) == "rank 3";
    } else if (ph == "M" && std::string(e["name"].GetString()) == "dsx_trace") {
      EXPECT_EQ(e["args"]["world_size"].GetInt(), 4);
      EXPECT_NEAR(e["args"]["clock_offset_us"].GetDouble(), 12.5, 1e-9);
    }
  }
  EXPECT_TRUE(saw_span && saw_thread_name && saw_process_name);
}

TEST_F(TraceTest, AnUnwritableDirectoryIsAClearError) {
  try {
    write_chrome_trace("/proc/dsx-no/rank0.trace.json", {}, {}, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/proc/dsx-no/rank0.trace.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsx::trace
