// The step watchdog's reading of a rank's progress file (launcher/progress_watch.h), on a real
// file with the clock given: when a rank counts as hung, and what the message says.
#include "launcher/progress_watch.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "tests/launcher/launch_test_util.h"

using dsx::launcher::ProgressWatch;
using std::chrono::milliseconds;

namespace {

// As dsx train writes it: the number right-aligned in 20 characters and a newline, in place.
void write_step(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "r+");
  if (!f) f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

std::string line(long step) {
  char text[32];
  std::snprintf(text, sizeof text, "%20ld\n", step);
  return text;
}

}  // namespace

TEST(ProgressWatch, ARankIsHungAfterTheTimeoutBeyondItsSlowestStep) {
  dsx::test::ScratchDir dir;
  const std::string file = dir / "rank0";
  ProgressWatch watch(file);
  const auto t0 = ProgressWatch::Clock::now();
  EXPECT_FALSE(watch.check(t0, 2)) << "no file yet: not watched";
  EXPECT_FALSE(watch.check(t0 + milliseconds(60000), 2)) << "no file yet: not watched";
  write_step(file, line(3));
  ProgressWatch fresh(file);
  EXPECT_FALSE(fresh.check(t0, 2)) << "the first step seen starts the watch";
  write_step(file, line(4));
  EXPECT_FALSE(fresh.check(t0 + milliseconds(1500), 2));  // a step of 1.5 s: the slowest so far
  EXPECT_EQ(fresh.last_step(), 4);
  EXPECT_FALSE(fresh.check(t0 + milliseconds(1500 + 3400), 2)) << "2 s + 1.5 s not yet passed";
  const auto hung = fresh.check(t0 + milliseconds(1500 + 3600), 2);
  ASSERT_TRUE(hung);
  EXPECT_EQ(*hung,
            "made no progress for 3.6 s after step 4 (DSX_COMM_TIMEOUT, 2 s, beyond its slowest "
            "step, 1.5 s); treating it as hung");
}

TEST(ProgressWatch, ALineCaughtHalfWayIsIgnoredAndTheEndStopsTheWatch) {
  dsx::test::ScratchDir dir;
  const std::string file = dir / "rank0";
  ProgressWatch watch(file);
  const auto t0 = ProgressWatch::Clock::now();
  write_step(file, "                   7");  // no newline yet
  EXPECT_FALSE(watch.check(t0, 1));
  EXPECT_FALSE(watch.check(t0 + milliseconds(5000), 1)) << "a half line started the watch";
  write_step(file, line(7));
  EXPECT_FALSE(watch.check(t0 + milliseconds(5000), 1));
  EXPECT_TRUE(watch.check(t0 + milliseconds(6100), 1)) << "one second with no new step";
  ProgressWatch ended(file);
  EXPECT_FALSE(ended.check(t0, 1));
  write_step(file, "end\n");  // over the first characters, as dsx train writes it
  EXPECT_FALSE(ended.check(t0 + milliseconds(100), 1));
  EXPECT_FALSE(ended.check(t0 + milliseconds(60000), 1)) << "the final save is not watched";
}
