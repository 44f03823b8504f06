// Every optimizer x weight-decay mode x bias correction x copy-out dtype, against float64
// references written from the textbook formulas (not from the kernels' operation order), at
// every SIMD level, lengths 0..1000003, aligned and unaligned. Bounds: fp32 outputs within 8
// fp32 roundings of the magnitudes of the terms; fp16/bf16 copies are the round-to-nearest-even
// of the fp32 result, so within 2^-11 (fp16) or 2^-8 (bf16) relative of the reference on top.
#include <cmath>

#include "dsx/error.h"
#include "kernels/optimizers.h"
#include "optimizer_harness.h"

namespace dsx::kernels::test {
namespace {

const std::vector<DType> kCopies{DType::F16, DType::BF16};

// p, g, m, v: parameters near N(0,1), gradients N(0,0.1), moments of matching size.
const std::vector<BufferInit> kAdamInit{
    {0, 1, false}, {0, 0.1f, false}, {0, 0.05f, false}, {0, 0.01f, true}};

void check_adam(AdamHyper h, int64_t step, float grad_factor) {
  std::string name = std::string("adam w_mode=") + (h.adam_w_mode ? "1" : "0") +
                     " bias=" + (h.bias_correction ? "1" : "0") +
                     " wd=" + std::to_string(h.weight_decay) + " step=" + std::to_string(step);
  auto kernel = [&](float* const* b, size_t n, ParamCopy copy) {
    adam_step(h, step, grad_factor, b[0], b[1], b[2], b[3], n, copy);
  };
  // Each scale is the magnitude of the terms behind a value, plus the errors of the inputs it
  // came from carried through (the moments may cancel; the update divides by them).
  auto reference = [&](const double* in, double* out, double* scale) {
    double p = in[0], g = in[1] * grad_factor, m = in[2], v = in[3];
    double b1 = h.beta1, b2 = h.beta2, lr = h.lr, wd = h.weight_decay;
    double g_scale = std::fabs(g);
    if (!h.adam_w_mode) {
      g += wd * p;
      g_scale += std::fabs(wd * p);
    }
    double m2 = b1 * m + (1 - b1) * g, v2 = b2 * v + (1 - b2) * g * g;
    double bc1 = h.bias_correction ? 1 - std::pow(b1, double(step)) : 1;
    double bc2 = h.bias_correction ? 1 - std::pow(b2, double(step)) : 1;
    double denom = std::sqrt(v2 / bc2) + h.eps;
    double update = lr * (m2 / bc1) / denom;
    double decay = h.adam_w_mode ? lr * wd * p : 0;
    out[0] = p - decay - update;
    out[2] = m2;
    out[3] = v2;
    scale[2] = std::fabs(b1 * m) + (1 - b1) * g_scale;
    scale[3] = std::fabs(b2 * v) + (1 - b2) * g_scale * g_scale * 2;
    scale[0] =
        std::fabs(p) + std::fabs(decay) + 2 * std::fabs(update) + lr / bc1 / denom * scale[2];
  };
  check_optimizer(name, kAdamInit, kernel, reference, kCopies);
}

TEST(Adam, AllModesMatchFloat64Reference) {
  for (bool bias : {true, false}) {
    for (int64_t step : {int64_t{1}, int64_t{10}}) {
      AdamHyper h;
      h.lr = 1e-3f;
      h.bias_correction = bias;
      h.weight_decay = 0.0f;
      check_adam(h, step, 1.0f);
      h.weight_decay = 0.1f;
      h.adam_w_mode = true;
      check_adam(h, step, 0.5f);
      h.adam_w_mode = false;
      check_adam(h, step, 1.0f);
    }
  }
}

TEST(Adam, StepZeroIsRejected) {
  float p = 1, g = 1, m = 0, v = 0;
  EXPECT_THROW(adam_step(AdamHyper{}, 0, 1.0f, &p, &g, &m, &v, 1), dsx::Error);
}

// DeepSpeed's kernels do not test for Inf/NaN: a NaN gradient reaches the moments and the weight.
TEST(Adam, NanGradientPropagatesLikeDeepSpeed) {
  float p[3] = {1, 1, 1}, g[3] = {0.1f, NAN, INFINITY}, m[3] = {}, v[3] = {};
  adam_step(AdamHyper{}, 1, 1.0f, p, g, m, v, 3);
  EXPECT_TRUE(std::isfinite(p[0]));
  EXPECT_TRUE(std::isnan(p[1]) && std::isnan(m[1]) && std::isnan(v[1]));
  EXPECT_TRUE(std::isnan(p[2]));  // inf / inf
  EXPECT_TRUE(std::isinf(v[2]));
}

TEST(Lion, MatchesFloat64Reference) {
  for (float wd : {0.0f, 0.1f}) {
    LionHyper h;
    h.lr = 1e-3f;
    h.weight_decay = wd;
    auto kernel = [&](float* const* b, size_t n, ParamCopy copy) {
      lion_step(h, 1.0f, b[0], b[1], b[2], n, copy);
    };
    auto reference = [&](const double* in, double* out, double* scale) {
      double p = in[0], g = in[1], m = in[2];
      double c = h.beta1 * m + (1 - double(h.beta1)) * g;
      double step = c > 0 ? -double(h.lr) : double(h.lr);
      out[0] = p * (1 - double(h.lr) * wd) + step;
      out[2] = h.beta2 * m + (1 - double(h.beta2)) * g;
      scale[0] = std::fabs(p) + h.lr;
      scale[2] = std::fabs(h.beta2 * m) + std::fabs((1 - h.beta2) * g);
    };
    check_optimizer("lion wd=" + std::to_string(wd),
                    {{0, 1, false}, {0, 0.1f, false}, {0, 0.05f, false}}, kernel, reference,
                    kCopies);
  }
}

TEST(Lion, TieAndNanMoveByPlusLrLikeDeepSpeed) {
  LionHyper h;
  h.lr = 0.5f;
  float p[2] = {1, 1}, g[2] = {0, NAN}, m[2] = {0, 0};
  lion_step(h, 1.0f, p, g, m, 2);
  EXPECT_EQ(p[0], 1.5f);  // c == 0: +lr
  EXPECT_EQ(p[1], 1.5f);  // c is NaN: not > 0, so +lr; the NaN stays in m
  EXPECT_TRUE(std::isnan(m[1]));
}

void check_sgd(SgdHyper h, int64_t step) {
  bool has_momentum = h.momentum != 0;
  std::string name = "sgd momentum=" + std::to_string(h.momentum) +
                     " nesterov=" + (h.nesterov ? "1" : "0") +
                     " wd=" + std::to_string(h.weight_decay) + " step=" + std::to_string(step);
  auto kernel = [&](float* const* b, size_t n, ParamCopy copy) {
    sgd_step(h, step, 1.0f, b[0], b[1], has_momentum ? b[2] : nullptr, n, copy);
  };
  auto reference = [&](const double* in, double* out, double* scale) {
    double p = in[0], g = in[1], d = g + double(h.weight_decay) * p, buf = in[2];
    double dscale = std::fabs(g) + std::fabs(h.weight_decay * p);
    out[2] = buf;
    scale[2] = 1;
    if (has_momentum) {
      double b = step == 1 ? d : h.momentum * buf + (1 - double(h.dampening)) * d;
      scale[2] = step == 1 ? dscale : std::fabs(h.momentum * buf) + dscale;
      out[2] = b;
      d = h.nesterov ? d + h.momentum * b : b;
      dscale += std::fabs(h.momentum * b) + scale[2];
    }
    out[0] = p - h.lr * d;
    scale[0] = std::fabs(p) + h.lr * dscale;
  };
  check_optimizer(name, {{0, 1, false}, {0, 0.1f, false}, {0, 0.1f, false}}, kernel, reference,
                  kCopies);
}

TEST(Sgd, MomentumNesterovAndFirstStepMatchFloat64Reference) {
  SgdHyper h;
  h.lr = 0.01f;
  check_sgd(h, 1);
  h.weight_decay = 0.1f;
  check_sgd(h, 3);
  h.momentum = 0.9f;
  h.dampening = 0.1f;
  check_sgd(h, 1);
  check_sgd(h, 2);
  h.nesterov = true;
  h.dampening = 0.0f;
  check_sgd(h, 1);
  check_sgd(h, 2);
}

TEST(Sgd, MomentumWithoutBufferIsRejected) {
  SgdHyper h;
  h.momentum = 0.9f;
  float p = 1, g = 1;
  EXPECT_THROW(sgd_step(h, 1, 1.0f, &p, &g, nullptr, 1), dsx::Error);
}

TEST(SgdAndAdagrad, NanGradientPropagatesToTheWeight) {
  SgdHyper s;
  s.momentum = 0.9f;
  float p[2] = {1, 1}, g[2] = {0.5f, NAN}, buf[2] = {};
  sgd_step(s, 1, 1.0f, p, g, buf, 2);
  EXPECT_TRUE(std::isfinite(p[0]));
  EXPECT_TRUE(std::isnan(p[1]) && std::isnan(buf[1]));
  float q[2] = {1, 1}, sum[2] = {};
  adagrad_step(AdagradHyper{}, 1.0f, q, g, sum, 2);
  EXPECT_TRUE(std::isfinite(q[0]));
  EXPECT_TRUE(std::isnan(q[1]) && std::isnan(sum[1]));
}

TEST(Adagrad, MatchesFloat64Reference) {
  for (float wd : {0.0f, 0.1f}) {
    AdagradHyper h;
    h.weight_decay = wd;
    auto kernel = [&](float* const* b, size_t n, ParamCopy copy) {
      adagrad_step(h, 1.0f, b[0], b[1], b[2], n, copy);
    };
    auto reference = [&](const double* in, double* out, double* scale) {
      double p = in[0], d = in[1] + double(wd) * p;
      double d_scale = std::fabs(in[1]) + std::fabs(double(wd) * p);
      double sum = in[2] + d * d;
      double denom = std::sqrt(sum) + h.eps;
      double update = h.lr * d / denom;
      out[0] = p - update;
      out[2] = sum;
      scale[2] = in[2] + 2 * d_scale * d_scale;
      scale[0] = std::fabs(p) + 2 * std::fabs(update) + h.lr * d_scale / denom;
    };
    check_optimizer("adagrad wd=" + std::to_string(wd),
                    {{0, 1, false}, {0, 0.1f, false}, {0, 0.01f, true}}, kernel, reference,
                    kCopies);
  }
}

}  // namespace
}  // namespace dsx::kernels::test
