// The autotuner's search (engine/autotune/search.h) against trial outcomes with known answers:
// a rank's bytes are fixed[stage] + micro-batch x per_sample, and a trial fits when they are
// within the limit. The runner is a formula, so every expected figure is exact; the real trials
// (dsx launch + dsx train) are tested in test_autotune_cli.cpp.
#include <gtest/gtest.h>

#include <map>

#include "dsx/error.h"
#include "tools/autotune/search.h"

namespace at = dsx::autotune;

namespace {

struct Machine {
  int64_t limit = 1000;
  std::map<int, int64_t> fixed = {{0, 400}, {1, 300}, {2, 250}, {3, 100}};
  int64_t per_sample = 10;
  int64_t reported_per_sample = 10;  // what a probe says its activations are (a wrong model if != per_sample)
  std::map<int, double> speed = {{0, 1.0}, {1, 1.1}, {2, 1.2}, {3, 0.8}};  // samples/s per micro-batch unit
  std::vector<at::Experiment> ran;

  at::Trial operator()(const at::Experiment& e) {
    ran.push_back(e);
    at::Trial t;
    const int64_t bytes = fixed.at(e.stage) + e.micro_batch * per_sample;
    if (bytes > limit) {
      t.status = at::TrialStatus::OutOfMemory;
      return t;
    }
    t.status = at::TrialStatus::Ok;
    t.metrics.activation_bytes = e.micro_batch * reported_per_sample;
    t.metrics.peak_memory_bytes = fixed.at(e.stage) + t.metrics.activation_bytes;
    // Bigger micro-batches run faster per sample, saturating: a shape real runs often have.
    t.metrics.throughput = speed.at(e.stage) * static_cast<double>(e.micro_batch) / (1.0 + 0.05 * e.micro_batch);
    t.metrics.latency = 1.0 / t.metrics.throughput;
    t.metrics.flops_per_gpu = t.metrics.throughput * 7;
    return t;
  }
};

at::TuneRequest request(std::vector<int> stages, int64_t batch, int64_t world = 2) {
  at::TuneRequest r;
  r.stages = std::move(stages);
  r.world = world;
  r.train_batch_size = batch;
  r.memory_limit = 1000;
  return r;
}

}  // namespace

TEST(AutotuneSearch, PredictionFromTheMemoryModel) {
  EXPECT_EQ(at::predict_max_micro(1000, 400, 10, 1024), 60);
  EXPECT_EQ(at::predict_max_micro(1000, 400, 10, 32), 32) << "capped by max_train_micro_batch_size_per_gpu";
  EXPECT_EQ(at::predict_max_micro(1000, 1000, 10, 32), 0) << "the fixed part alone fills the limit";
  EXPECT_EQ(at::predict_max_micro(0, 400, 10, 64), 64) << "no limit";
}

TEST(AutotuneSearch, SplitsOfTheGlobalBatch) {
  EXPECT_EQ(at::split_candidates(24, 1, 1024, 3), (std::vector<int64_t>{24, 12, 8}));
  EXPECT_EQ(at::split_candidates(24, 1, 10, 3), (std::vector<int64_t>{8, 6, 4})) << "only micro-batches that fit";
  EXPECT_EQ(at::split_candidates(24, 5, 10, 5), (std::vector<int64_t>{8, 6})) << "min_micro bounds from below";
  EXPECT_EQ(at::split_candidates(7, 1, 6, 3), (std::vector<int64_t>{1})) << "a prime batch has one split below it";
  EXPECT_TRUE(at::split_candidates(24, 1, 0, 3).empty()) << "nothing fits";
}

TEST(AutotuneSearch, AnExactMemoryModelNeedsThreeProbesPerStage) {
  Machine m;
  auto r = request({0, 1, 2, 3}, 2 * 48);
  const at::TuneResult result = at::tune(r, std::ref(m));
  ASSERT_EQ(result.memory.size(), 4u);
  const int64_t expected[] = {60, 70, 75, 90};  // (1000 - fixed) / 10
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(result.memory[s].max_micro, expected[s]) << "stage " << s;
    EXPECT_EQ(result.memory[s].predicted, expected[s]);
    EXPECT_EQ(result.memory[s].probes, 3) << "the smallest, the prediction, and one above it";
    EXPECT_EQ(result.memory[s].fixed_bytes, m.fixed[s]);
    EXPECT_EQ(result.memory[s].per_sample_bytes, 10);
  }
  // Timed splits of 48 per rank: the three largest divisors that fit.
  std::vector<int64_t> timed_stage0;
  for (const auto& t : result.trials)
    if (t.experiment.timed && t.experiment.stage == 0) timed_stage0.push_back(t.experiment.micro_batch);
  EXPECT_EQ(timed_stage0, (std::vector<int64_t>{48, 24, 16}));
  for (const auto& t : result.trials) {
    if (t.experiment.timed) {
      EXPECT_EQ(t.experiment.micro_batch * t.experiment.accumulation, 48);
    }
  }
  // The fastest: stage 2 (speed 1.2) at its largest split.
  ASSERT_TRUE(result.best);
  const at::Experiment& best = result.trials[*result.best].experiment;
  EXPECT_EQ(best.stage, 2);
  EXPECT_EQ(best.micro_batch, 48);
  EXPECT_EQ(best.accumulation, 1);
  EXPECT_EQ(best.name, "z2_mbs48_gas1");
}

TEST(AutotuneSearch, AWrongModelIsCorrectedByBisection) {
  for (int64_t reported : {3, 25}) {  // the model says activations are smaller / larger than they are
    Machine m;
    m.reported_per_sample = reported;
    const at::TuneResult result = at::tune(request({0}, 2 * 60), std::ref(m));
    EXPECT_EQ(result.memory[0].max_micro, 60) << "reported per sample " << reported;
    EXPECT_NE(result.memory[0].predicted, 60);
    EXPECT_LE(result.memory[0].probes, 14) << "a bisection over [1, 1024]";
    // Every probe above 60 ran out of memory, every one at or below it fitted.
    for (const auto& t : result.trials) {
      if (t.experiment.timed) continue;
      EXPECT_EQ(t.status == at::TrialStatus::Ok, t.experiment.micro_batch <= 60) << t.experiment.name;
    }
  }
}

TEST(AutotuneSearch, AStageThatNeverFitsIsSkipped) {
  Machine m;
  m.fixed[0] = 995;  // one sample of 10 bytes is over the limit
  const at::TuneResult result = at::tune(request({0, 3}, 2 * 8), std::ref(m));
  EXPECT_EQ(result.memory[0].max_micro, 0);
  EXPECT_EQ(result.memory[0].probes, 1);
  for (const auto& t : result.trials) {
    EXPECT_FALSE(t.experiment.timed && t.experiment.stage == 0);
  }
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.trials[*result.best].experiment.stage, 3);
  const std::string report = at::format_report(request({0, 3}, 16), result);
  EXPECT_NE(report.find("z0_mbs1_mem out of memory"), std::string::npos) << report;
  EXPECT_NE(report.find("z3_mbs8_gas1 (best)"), std::string::npos) << report;
}

TEST(AutotuneSearch, LatencyMetricPicksTheShortestStep) {
  Machine m;
  auto r = request({1, 2}, 2 * 12);
  r.metric = at::metric_named("latency");
  const at::TuneResult result = at::tune(r, std::ref(m));
  ASSERT_TRUE(result.best);
  for (const auto& t : result.trials) {
    if (t.experiment.timed) {
      EXPECT_GE(t.metrics.latency, result.trials[*result.best].metrics.latency);
    }
  }
  EXPECT_THROW(at::metric_named("speed"), dsx::Error);
}

TEST(AutotuneSearch, ABrokenTrialStopsTheSearchWithItsReason) {
  Machine m;
  int calls = 0;
  auto runner = [&](const at::Experiment& e) {
    at::Trial t = m(e);
    if (++calls == 2) {
      t.status = at::TrialStatus::Failed;
      t.error = "dsx: comm error: rank 1 died (log: x/log.txt)";
    }
    return t;
  };
  try {
    at::tune(request({0}, 16), runner);
    FAIL() << "a failed trial must stop the search";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Launch);
    EXPECT_NE(std::string(e.what()).find("rank 1 died"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("z0_mbs60_mem"), std::string::npos) << e.what();
  }
}

TEST(AutotuneSearch, ImpossibleRequestsAreRefused) {
  Machine m;
  EXPECT_THROW(at::tune(request({}, 16), std::ref(m)), dsx::Error);
  EXPECT_THROW(at::tune(request({4}, 16), std::ref(m)), dsx::Error);
  EXPECT_THROW(at::tune(request({0}, 15), std::ref(m)), dsx::Error) << "15 does not split over 2 ranks";
  auto r = request({0}, 16);
  r.min_micro = 8, r.max_micro = 4;
  EXPECT_THROW(at::tune(r, std::ref(m)), dsx::Error);
  EXPECT_TRUE(m.ran.empty()) << "nothing runs before the request is checked";
}

// A split takes the lead only by beating it by more than the noise (the larger measured spread of
// the two, at least 2%): a 3% edge within a 5% spread is noise, so the split tried first stays
// the winner and a repeated search picks it again; a 10% edge is not noise.
TEST(AutotuneSearch, AWinnerMustBeatTheNoise) {
  auto run_with = [](std::vector<double> throughputs, double spread) {
    size_t next = 0;
    auto runner = [&, throughputs, spread](const at::Experiment& e) {
      at::Trial t;
      t.status = at::TrialStatus::Ok;
      t.metrics.peak_memory_bytes = 100 + e.micro_batch;
      t.metrics.activation_bytes = e.micro_batch;
      if (e.timed) {
        t.metrics.throughput = throughputs.at(next++ % throughputs.size());
        t.metrics.latency = 1.0 / t.metrics.throughput;
        t.metrics.latency_spread = spread;
      }
      return t;
    };
    at::TuneRequest r = request({2}, 2 * 12);
    r.splits_per_stage = 2;
    r.memory_limit = 0;
    return at::tune(r, runner);
  };
  auto winner = [](const at::TuneResult& result) {
    return result.trials[*result.best].metrics.throughput;
  };
  EXPECT_EQ(winner(run_with({100, 103}, 0.05)), 100) << "a 3% edge inside a 5% spread is noise";
  EXPECT_EQ(winner(run_with({100, 110}, 0.05)), 110) << "a 10% edge is not";
  EXPECT_EQ(winner(run_with({100, 101.5}, 0.0)), 100) << "below the 2% floor, even with no measured spread";
  const std::string report = at::format_report(request({2}, 24), run_with({100, 103}, 0.05));
  EXPECT_NE(report.find("±5%"), std::string::npos) << report;
}
