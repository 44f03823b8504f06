// The bf16 attention (kernels/cpu/bf16_attention.h) against the float64 attention of
// decoder_layers.h on the same inputs: out, the probabilities and d qkv within bf16's rounding
// (operands rounded to 8 significant bits: ~2^-9 relative each), far from fp32's agreement, and
// the masked probabilities exactly zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_attention.h"

namespace {

namespace kc = dsx::kernels::cpu;

std::vector<float> normal_floats(size_t n, unsigned seed, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

// max |got - want| / max |want|
double worst_relative(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::max(err, std::fabs(got[i] - want[i])), scale = std::max(scale, std::fabs(want[i]));
  return err / scale;
}

// T = 130 crosses two 64-row blocks and a partial third; head size 16, two heads, two rows.
TEST(Bf16Attention, MatchesFloat64WithinBf16Rounding) {
  const int B = 2, T = 130, C = 32, NH = 2;
  const size_t N = size_t(B) * T;
  const auto qkv = normal_floats(N * 3 * C, 1, 1.5f), dout = normal_floats(N * C, 2, 1.0f);
  std::vector<float> out(N * C), att(size_t(B) * NH * T * T, 9.0f), dqkv(N * 3 * C, 9.0f);
  kc::decoder_attention_forward_bf16(out.data(), att.data(), qkv.data(), B, T, C, NH);
  kc::decoder_attention_backward_bf16(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                                      NH);

  const std::vector<double> qkv64(qkv.begin(), qkv.end()), dout64(dout.begin(), dout.end());
  std::vector<double> out64(out.size()), att64(att.size()), dqkv64(dqkv.size());
  kc::decoder_attention_forward(out64.data(), att64.data(), qkv64.data(), B, T, C, NH);
  kc::decoder_attention_backward(dqkv64.data(), dout64.data(), qkv64.data(), att64.data(), B, T, C,
                                 NH);

  const double out_err = worst_relative(out, out64), att_err = worst_relative(att, att64),
               dqkv_err = worst_relative(dqkv, dqkv64);
  EXPECT_LT(out_err, 2e-2);
  EXPECT_LT(att_err, 2e-2);
  EXPECT_LT(dqkv_err, 3e-2);
  // The products do read bf16 operands: fp32 ones would agree to ~1e-6.
  EXPECT_GT(std::max({out_err, att_err, dqkv_err}), 1e-4);
  for (int bh = 0; bh < B * NH; ++bh)
    for (int t = 0; t < T; ++t) {
      const float* row = att.data() + (size_t(bh) * T + t) * T;
      double sum = 0;
      for (int t2 = 0; t2 <= t; ++t2) sum += row[t2];
      ASSERT_NEAR(sum, 1.0, 1e-5) << "head " << bh << " row " << t;
      for (int t2 = t + 1; t2 < T; ++t2)
        ASSERT_EQ(row[t2], 0.0f) << "masked key " << t2 << " of row " << t;
    }
}

// The dispatcher keeps double (the reference model) on the fp32-summing kernel whatever it is
// asked.
TEST(Bf16Attention, DoubleIgnoresTheBf16Switch) {
  const int B = 1, T = 5, C = 8, NH = 2;
  std::vector<double> qkv(size_t(T) * 3 * C), out_a(size_t(T) * C), out_b(out_a.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = std::sin(double(i));
  std::vector<double> att_a(size_t(NH) * T * T), att_b(att_a.size());
  kc::decoder_attention_forward_as(true, out_a.data(), att_a.data(), qkv.data(), B, T, C, NH);
  kc::decoder_attention_forward(out_b.data(), att_b.data(), qkv.data(), B, T, C, NH);
  EXPECT_EQ(out_a, out_b);
}

}  // namespace
