// LAMB over a flat buffer of several tensors against a float64 reference: per-tensor trust
// ratios, DeepSpeed's clamp (only when both norms are non-zero), empty and all-zero tensors,
// every SIMD level, and the two-phase form ZeRO uses (partial norms summed over ranks).
#include <cmath>
#include <numeric>

#include "kernel_test_util.h"
#include "kernels/optimizers.h"

namespace dsx::kernels::test {
namespace {

struct LambData {
  std::vector<size_t> offsets;
  FloatBuffer p, g, m, v;
  explicit LambData(const std::vector<size_t>& sizes, const std::vector<float>& p_scale)
      : offsets(sizes.size() + 1, 0),
        p(total(sizes), 1),
        g(total(sizes), 1),
        m(total(sizes), 1),
        v(total(sizes), 1) {
    std::partial_sum(sizes.begin(), sizes.end(), offsets.begin() + 1);
    size_t n = offsets.back();
    fill_normal(p, n, 0, 1, 1);
    fill_normal(g, n, 0, 0.1f, 2);
    fill_normal(m, n, 0, 0.05f, 3);
    fill_abs_normal(v, n, 0.01f, 4);
    for (size_t t = 0; t < sizes.size(); ++t)
      for (size_t i = offsets[t]; i < offsets[t + 1]; ++i) p[i] *= p_scale[t];
  }
  static size_t total(const std::vector<size_t>& s) {
    return std::accumulate(s.begin(), s.end(), size_t{0});
  }
};

struct LambReference {
  std::vector<double> p, m, v, p_scale, trust;
};

LambReference lamb_reference(const LambHyper& h, int64_t step, const LambData& d) {
  size_t n = d.offsets.back(), tensors = d.offsets.size() - 1;
  LambReference r{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n),
                  std::vector<double>(n), std::vector<double>(tensors)};
  double b1 = h.beta1, b2 = h.beta2;
  double bc1 = h.bias_correction ? 1 - std::pow(b1, double(step)) : 1;
  double bc2 = h.bias_correction ? 1 - std::pow(b2, double(step)) : 1;
  double step_size = h.lr * std::sqrt(bc2) / bc1;
  std::vector<double> u(n), u_err(n);
  for (size_t t = 0; t < tensors; ++t) {
    double w_sq = 0, u_sq = 0;
    for (size_t i = d.offsets[t]; i < d.offsets[t + 1]; ++i) {
      r.m[i] = b1 * d.m[i] + (1 - b1) * d.g[i];
      r.v[i] = b2 * d.v[i] + (1 - b2) * double(d.g[i]) * d.g[i];
      double denom = h.eps_inside_sqrt ? std::sqrt(r.v[i] + h.eps) : std::sqrt(r.v[i]) + h.eps;
      u[i] = r.m[i] / denom + double(h.weight_decay) * d.p[i];
      u_err[i] =
          4 * std::fabs(u[i]) + (std::fabs(b1 * d.m[i]) + std::fabs((1 - b1) * d.g[i])) / denom;
      w_sq += double(d.p[i]) * d.p[i];
      u_sq += u[i] * u[i];
    }
    double w = std::sqrt(w_sq), un = std::sqrt(u_sq);
    double trust = 1;
    if (w != 0 && un != 0) trust = std::clamp(w / un, double(h.min_coeff), double(h.max_coeff));
    r.trust[t] = trust;
    for (size_t i = d.offsets[t]; i < d.offsets[t + 1]; ++i) {
      r.p[i] = d.p[i] - step_size * trust * u[i];
      // The trust ratio itself carries a few fp32 roundings, so count the whole update once more.
      r.p_scale[i] = std::fabs(d.p[i]) + step_size * trust * (u_err[i] + 8 * std::fabs(u[i]));
    }
  }
  return r;
}

void check_lamb(const LambHyper& h, int64_t step, const std::vector<size_t>& sizes,
                const std::vector<float>& p_scale) {
  LambData start(sizes, p_scale);
  LambReference want = lamb_reference(h, step, start);
  size_t n = start.offsets.back(), tensors = sizes.size();
  std::vector<double> ones_scale_m(n), ones_scale_v(n);
  for (size_t i = 0; i < n; ++i) {
    ones_scale_m[i] = std::fabs(h.beta1 * start.m[i]) + std::fabs((1 - h.beta1) * start.g[i]);
    ones_scale_v[i] =
        std::fabs(h.beta2 * start.v[i]) + 2 * std::fabs((1 - h.beta2) * start.g[i] * start.g[i]);
  }
  for (SimdLevel level : supported_levels()) {
    ScopedSimdLevel scoped(level);
    LambData d = start;
    std::vector<float> trust(tensors);
    std::vector<uint16_t> copy(n);
    lamb_step(h, step, 1.0f, d.p.data(), d.g.data(), d.m.data(), d.v.data(), d.offsets.data(),
              tensors, trust.data(), {DType::BF16, copy.data()});
    std::string at = std::string("lamb simd=") + simd_level_name(level) +
                     " bias=" + (h.bias_correction ? "1" : "0") +
                     " eps_inside_sqrt=" + (h.eps_inside_sqrt ? "1" : "0");
    for (size_t t = 0; t < tensors; ++t)
      EXPECT_NEAR(trust[t], want.trust[t], 1e-5 * want.trust[t]) << at << " trust of tensor " << t;
    ASSERT_TRUE(near_all(d.p.data(), want.p, want.p_scale, kFp32Tolerance, at + " param"));
    ASSERT_TRUE(near_all(d.m.data(), want.m, ones_scale_m, kFp32Tolerance, at + " exp_avg"));
    ASSERT_TRUE(near_all(d.v.data(), want.v, ones_scale_v, kFp32Tolerance, at + " exp_avg_sq"));
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(copy[i], float_to_bf16(d.p[i])) << at << " bf16 copy " << i;
  }
}

TEST(Lamb, PerTensorTrustRatioMatchesFloat64Reference) {
  // Tensor 0: ratio ~100, clamped to max_coeff; tensor 2: ratio ~1e-4, clamped to min_coeff;
  // tensor 3 is empty; tensor 4 has all-zero weights (trust 1, as DeepSpeed).
  std::vector<size_t> sizes{17, 1000, 4099, 0, 33, 1};
  std::vector<float> scale{100.0f, 1.0f, 1e-4f, 1.0f, 0.0f, 1.0f};
  for (bool bias : {true, false}) {
    for (bool inside : {false, true}) {
      LambHyper h;
      h.lr = 1e-2f;
      h.weight_decay = 0.01f;
      h.bias_correction = bias;
      h.eps_inside_sqrt = inside;
      check_lamb(h, 3, sizes, scale);
    }
  }
}

TEST(Lamb, LargeUnalignedTensorsMatchFloat64Reference) {
  LambHyper h;
  h.weight_decay = 0.1f;
  check_lamb(h, 1, {1000003, 15, 16}, {1.0f, 1.0f, 1.0f});
}

TEST(Lamb, ClampedRatiosAreTheBounds) {
  LambHyper h;
  LambData d({64, 64}, {1e3f, 1e-5f});
  std::vector<float> trust(2);
  lamb_step(h, 1, 1.0f, d.p.data(), d.g.data(), d.m.data(), d.v.data(), d.offsets.data(), 2,
            trust.data());
  EXPECT_EQ(trust[0], h.max_coeff);
  EXPECT_EQ(trust[1], h.min_coeff);
}

// As DeepSpeed's: a NaN gradient makes its tensor's trust ratio NaN, so the whole tensor (and
// only that tensor) becomes NaN.
TEST(Lamb, NanGradientPoisonsOnlyItsTensorLikeDeepSpeed) {
  LambHyper h;
  LambData d({40, 40}, {1, 1});
  d.g[5] = NAN;
  std::vector<float> trust(2);
  lamb_step(h, 1, 1.0f, d.p.data(), d.g.data(), d.m.data(), d.v.data(), d.offsets.data(), 2,
            trust.data());
  EXPECT_TRUE(std::isnan(trust[0]));
  EXPECT_TRUE(std::isfinite(trust[1]));
  for (size_t i = 0; i < 40; ++i) EXPECT_TRUE(std::isnan(d.p[i])) << i;
  for (size_t i = 40; i < 80; ++i) EXPECT_TRUE(std::isfinite(d.p[i])) << i;
}

// ZeRO's partitioned LAMB: each rank holds a slice that cuts tensors; the per-tensor partial
// squares are summed over ranks before lamb_apply. Same result as one rank holding everything.
TEST(Lamb, TwoPhasePartitionedEqualsWhole) {
  LambHyper h;
  h.weight_decay = 0.01f;
  std::vector<size_t> sizes{300, 501, 199};
  LambData whole({300, 501, 199}, {1, 1, 1});
  LambData parts = whole;
  std::vector<float> trust_whole(3), trust_parts(3);
  lamb_step(h, 2, 1.0f, whole.p.data(), whole.g.data(), whole.m.data(), whole.v.data(),
            whole.offsets.data(), 3, trust_whole.data());
  // Rank 0 holds [0, 500): tensor 0 and 200 elements of tensor 1; rank 1 holds [500, 1000).
  std::vector<size_t> rank0{0, 300, 500}, rank1{0, 301, 500};
  std::vector<double> n0(4), n1(4), total(6);
  lamb_prepare(h, 2, 1.0f, parts.p.data(), parts.g.data(), parts.m.data(), parts.v.data(),
               rank0.data(), 2, n0.data());
  lamb_prepare(h, 2, 1.0f, parts.p.data() + 500, parts.g.data() + 500, parts.m.data() + 500,
               parts.v.data() + 500, rank1.data(), 2, n1.data());
  // "Allreduce": tensor 0 = rank 0's first; tensor 1 = rank 0's second + rank 1's first; tensor 2 =
  // rank 1's second.
  total = {n0[0], n0[1], n0[2] + n1[0], n0[3] + n1[1], n1[2], n1[3]};
  std::vector<size_t> whole_offsets{0, 300, 801, 1000};
  lamb_apply(h, 2, parts.p.data(), parts.m.data(), parts.v.data(), whole_offsets.data(), 3,
             total.data(), trust_parts.data());
  for (size_t t = 0; t < 3; ++t) EXPECT_NEAR(trust_parts[t], trust_whole[t], 1e-6 * trust_whole[t]);
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_NEAR(parts.p[i], whole.p[i], 1e-6 * std::fabs(whole.p[i]) + 1e-9) << i;
    ASSERT_EQ(parts.m[i], whole.m[i]) << i;
    ASSERT_EQ(parts.v[i], whole.v[i]) << i;
  }
}

}  // namespace
}  // namespace dsx::kernels::test
