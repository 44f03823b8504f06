// The flops profiler's count of GPT-2's work, against a count made operation by operation.
#include <gtest/gtest.h>

#include "engine/flops_profiler.h"
#include "models/gpt2/flops.h"

using dsx::models::gpt2_forward_flops;

// Walks the forward pass as the CPU model runs it and adds 2 FLOPs per multiply-add.
double counted_forward_flops(const dsx::models::GPT2Config& c, int B, int T) {
  double flops = 0;
  const double C = c.channels;
  for (int b = 0; b < B; ++b) {
    for (int l = 0; l < c.num_layers; ++l) {
      for (int t = 0; t < T; ++t) {
        flops += 2 * C * 3 * C;  // qkv projection
        for (int t2 = 0; t2 <= t; ++t2) flops += 2 * C + 2 * C;  // q.k over heads, and att * v
        flops += 2 * C * C;      // attention output projection
        flops += 2 * C * 4 * C;  // fc
        flops += 2 * 4 * C * C;  // fc projection
      }
    }
    flops += 2.0 * T * C * c.padded_vocab_size;  // tied classifier over the padded vocabulary
  }
  return flops;
}

TEST(FlopsProfiler, Gpt2ForwardFlopsMatchAnOperationCount) {
  for (const char* preset : {"byte-tiny", "byte-small", "gpt2-124M"}) {
    auto c = dsx::models::gpt2_preset(preset);
    for (int T : {1, 7, 64}) {
      EXPECT_DOUBLE_EQ(gpt2_forward_flops(c, 3, T), counted_forward_flops(c, 3, T)) << preset << " T " << T;
    }
  }
}

TEST(FlopsProfiler, Gpt2_124MIsAbout6NPerTokenForTraining) {
  // the familiar rule of thumb: training costs about 6 FLOPs per parameter per token (+ attention)
  auto c = dsx::models::gpt2_preset("gpt2-124M");
  const double per_token = 3 * gpt2_forward_flops(c, 1, 1024) / 1024;
  EXPECT_GT(per_token / (6 * 124e6), 1.0);
  EXPECT_LT(per_token / (6 * 124e6), 1.4);
}

TEST(FlopsProfiler, SummaryReportsMfuAgainstTheMeasuredPeak) {
  dsx::engine::FlopsProfile p;
  p.step = 1;
  p.params = 1000;
  p.forward_flops = 1e9;
  p.forward_seconds = 0.1;
  p.backward_seconds = 0.2;
  p.iteration_seconds = 0.3;
  p.samples = 8;
  p.peak_flops_per_second = 20e9;
  const std::string s = dsx::engine::format_flops_profile(p);
  EXPECT_NE(s.find("fwd flops per GPU:                                            1.00 G"), std::string::npos) << s;
  EXPECT_NE(s.find("FLOPS per GPU = 3 * fwd flops per GPU / iter latency:         10.00 GFLOPS"), std::string::npos) << s;
  EXPECT_NE(s.find("50.0%"), std::string::npos) << s;  // 10 of 20 GFLOPS
}
