// The summary rank 0 prints after a traced window: per-phase spread over ranks, the straggler,
// and the share of communication hidden behind compute.
#include <gtest/gtest.h>

#include <regex>

#include "engine/profiling/window_summary.h"

namespace dsx::engine {
namespace {

trace::Event ev(const char* name, const char* category, int track, double begin_ms, double end_ms) {
  return {name, category, track, static_cast<int64_t>(begin_ms * 1e6), static_cast<int64_t>(end_ms * 1e6), {}};
}

RankWindow window(int rank, double step_s, double wait_s, double forward_s) {
  RankWindow w;
  w.rank = rank;
  w.steps = 2;
  w.step_seconds = step_s;
  w.wait_seconds = wait_s;
  w.phases["forward"] = forward_s;
  return w;
}

TEST(WindowSummary, RankWindowSumsTheTrainingTracksSpansByKind) {
  const std::vector<trace::Event> events = {
      ev("ProfilerStep#4", "user_annotation", 1, 0, 10),     ev("forward", "phase", 1, 0, 3),
      ev("forward layer 1", "layer", 1, 0, 1), ev("loss allreduce", "wait", 1, 8, 10),
      ev("ProfilerStep#5", "user_annotation", 1, 10, 30),    ev("forward", "phase", 1, 10, 14),
      ev("bucket allreduce", "comm", 2, 2, 9),  // another track: not this thread's time
  };
  const RankWindow w = rank_window(events, 1, 3);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.steps, 2);
  EXPECT_NEAR(w.step_seconds, 0.030, 1e-12);
  EXPECT_NEAR(w.wait_seconds, 0.002, 1e-12);
  EXPECT_NEAR(w.compute_seconds(), 0.028, 1e-12);
  EXPECT_NEAR(w.phases.at("forward"), 0.007, 1e-12);
  EXPECT_EQ(w.phases.count("forward layer 1"), 0u);
}

TEST(WindowSummary, TextRoundTrips) {
  RankWindow w = window(5, 1.25, 0.5, 0.125);
  w.comm_busy_seconds = 0.75;
  w.comm_exposed_seconds = 0.25;
  w.phases["save checkpoint"] = 2;
  const RankWindow back = rank_window_from_text(to_text(w));
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.steps, 2);
  EXPECT_DOUBLE_EQ(back.step_seconds, 1.25);
  EXPECT_DOUBLE_EQ(back.wait_seconds, 0.5);
  EXPECT_DOUBLE_EQ(back.comm_busy_seconds, 0.75);
  EXPECT_DOUBLE_EQ(back.phases.at("save checkpoint"), 2);
}

TEST(WindowSummary, TheStragglerIsTheRankWhoseComputeIsFarAboveTheMedian) {
  // Every rank's step lasts as long (they wait for each other); rank 2 computes, the rest wait.
  std::vector<RankWindow> ranks = {window(0, 1.0, 0.6, 0.1), window(1, 1.0, 0.62, 0.1), window(2, 1.0, 0.1, 0.4),
                                   window(3, 1.0, 0.58, 0.1)};
  const auto s = find_straggler(ranks);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 2);
  EXPECT_NEAR(s->above_median, 0.9 / 0.41 - 1, 1e-9);
  // within 10% of the median: nobody
  ranks[2] = window(2, 1.0, 0.56, 0.1);
  EXPECT_FALSE(find_straggler(ranks).has_value());
  EXPECT_FALSE(find_straggler({window(0, 1, 0, 1)}).has_value()) << "one rank has no straggler";
}

TEST(WindowSummary, TheTableShowsEachPhasesSpreadTheStragglerAndTheHiddenShare) {
  std::vector<RankWindow> ranks = {window(0, 1.0, 0.6, 0.1), window(1, 1.0, 0.1, 0.45)};
  for (auto& r : ranks) r.comm_busy_seconds = 0.4, r.comm_exposed_seconds = 0.1;
  const auto lines = format_window_summary(ranks, 3, 4);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  EXPECT_NE(text.find("trace of steps 3-4 over 2 rank(s), ms per step:"), std::string::npos) << text;
  // forward: 50 ms per step on rank 0, 225 on rank 1 (median 137.5), rank 1 slowest
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\n  forward +50\.00 +137\.50 +225\.00  rank 1\n)"))) << text;
  EXPECT_NE(text.find("straggler: rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden behind compute: 75%"), std::string::npos) << text;
}

}  // namespace
}  // namespace dsx::engine
