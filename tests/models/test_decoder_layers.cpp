// Float64 finite-difference checks of every decoder layer kernel (kernels/cpu/decoder_layers.h): each
// layer's backward is the gradient of loss = sum(out * R) for a random R, checked against central
// differences of its forward, for inputs and parameters alike.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/decoder_layers.h"
#include "kernels/decoder_math.h"
#include "tests/models/gradcheck.h"

namespace kc = dsx::kernels::cpu;
using namespace dsx::test;  // gradcheck.h: dot, gradient_error, random_vector

namespace {

constexpr double kTol = 1e-6;

}  // namespace

TEST(DecoderLayers, PositionalEmbeddingGradients) {
  const int B = 2, T = 3, C = 4, V = 5;
  std::vector<int32_t> tokens = {1, 3, 1, 4, 1, 0};  // token 1 repeats: its gradient sums
  auto wte = random_vector(V * C, 1), wpe = random_vector(T * C, 2), R = random_vector(B * T * C, 3);
  std::vector<double> out(B * T * C);
  auto f = [&] {
    kc::decoder_positional_embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, R);
  };
  std::vector<double> dwte(V * C, 0), dwpe(T * C, 0);
  kc::decoder_positional_embedding_backward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C);
  EXPECT_LT(gradient_error(f, wte.data(), wte.size(), dwte.data()), kTol);
  EXPECT_LT(gradient_error(f, wpe.data(), wpe.size(), dwpe.data()), kTol);
  EXPECT_EQ(dwte[2 * C], 0.0);  // token 2 never appears
}

TEST(DecoderLayers, LayerNormGradientsAndStatistics) {
  const size_t N = 5;
  const int C = 7;
  auto x = random_vector(N * C, 4, 3.0), w = random_vector(C, 5), b = random_vector(C, 6);
  auto R = random_vector(N * C, 7);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto f = [&] {
    kc::decoder_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(out, R);
  };
  f();
  // Normalised rows: with weight 1 and bias 0 each row would have mean 0, variance ~1.
  double m = 0;
  for (int i = 0; i < C; ++i) m += x[i];
  EXPECT_NEAR(mean[0], m / C, 1e-12);
  std::vector<double> dx(N * C, 0), dw(C, 0), db(C, 0);
  kc::decoder_layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                              rstd.data(), N, C);
  EXPECT_LT(gradient_error(f, x.data(), x.size(), dx.data()), kTol);
  EXPECT_LT(gradient_error(f, w.data(), w.size(), dw.data()), kTol);
  EXPECT_LT(gradient_error(f, b.data(), b.size(), db.data()), kTol);
}

TEST(DecoderLayers, LayerNormBackwardAccumulatesIntoTheResidualGradient) {
  const size_t N = 2;
  const int C = 3;
  auto x = random_vector(N * C, 8), w = random_vector(C, 9), b = random_vector(C, 10), g = random_vector(N * C, 11);
  std::vector<double> out(N * C), mean(N), rstd(N);
  kc::decoder_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<double> d0(N * C, 0), d1(N * C, 5.0), dw(C, 0), db(C, 0);
  kc::decoder_layernorm_backward(d0.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  kc::decoder_layernorm_backward(d1.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  for (size_t i = 0; i < N * C; ++i) EXPECT_NEAR(d1[i], d0[i] + 5.0, 1e-12);
}

TEST(DecoderLayers, MatmulGradients) {
  const size_t N = 6;
  const int C = 5, OC = 4;
  auto x = random_vector(N * C, 12), w = random_vector(OC * C, 13), b = random_vector(OC, 14);
  auto R = random_vector(N * OC, 15);
  std::vector<double> out(N * OC);
  auto f = [&] {
    kc::decoder_matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
    return dot(out, R);
  };
  f();
  double expect = b[1];
  for (int i = 0; i < C; ++i) expect += x[2 * C + i] * w[1 * C + i];
  EXPECT_NEAR(out[2 * OC + 1], expect, 1e-12);  // PyTorch Linear layout: out = x W^T + b
  std::vector<double> dx(N * C, 7.0), dw(OC * C, 0), db(OC, 0);
  kc::decoder_matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
  EXPECT_LT(gradient_error(f, x.data(), x.size(), dx.data()), kTol);  // overwritten, not += 7
  EXPECT_LT(gradient_error(f, w.data(), w.size(), dw.data()), kTol);
  EXPECT_LT(gradient_error(f, b.data(), b.size(), db.data()), kTol);
}

TEST(DecoderLayers, AttentionGradientsAndCausality) {
  const int B = 2, T = 5, C = 6, NH = 2;
  auto qkv = random_vector(B * T * 3 * C, 16), R = random_vector(B * T * C, 17);
  std::vector<double> out(B * T * C), att(B * NH * T * T);
  auto f = [&] {
    kc::decoder_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  f();
  // Position 0 attends only to itself: its output is its own value vector.
  for (int i = 0; i < C; ++i) EXPECT_NEAR(out[i], qkv[2 * C + i], 1e-12);
  std::vector<double> dqkv(B * T * 3 * C);
  kc::decoder_attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  EXPECT_LT(gradient_error(f, qkv.data(), qkv.size(), dqkv.data(), 400), kTol);
  // The last position's keys and values influence nothing before it: changing them moves only
  // the last output row.
  auto before = out;
  qkv[(T - 1) * 3 * C + C] += 1.0;
  f();
  for (int t = 0; t < T - 1; ++t)
    for (int i = 0; i < C; ++i) EXPECT_EQ(out[t * C + i], before[t * C + i]);
}

// The tied head computes only the V real vocabulary entries of the Vp padded ones: padded logits
// columns and padded rows of the embedding gradient are left untouched.
TEST(DecoderLayers, ClassifierGradientsSkipThePaddedVocabulary) {
  const size_t N = 6;
  const int C = 5, V = 7, Vp = 10;
  auto x = random_vector(N * C, 60), wte = random_vector(Vp * C, 61), R = random_vector(N * Vp, 62);
  for (size_t r = 0; r < N; ++r)
    for (int v = V; v < Vp; ++v) R[r * Vp + v] = 0;  // as cross-entropy's gradient leaves them
  std::vector<double> logits(N * Vp, 42.0);
  auto f = [&] {
    kc::decoder_classifier_forward(logits.data(), x.data(), wte.data(), N, C, V, Vp);
    return dot(logits, R);
  };
  f();
  for (size_t r = 0; r < N; ++r)
    for (int v = V; v < Vp; ++v) EXPECT_EQ(logits[r * Vp + v], 42.0);
  std::vector<double> dx(N * C), dwte(Vp * C, 0.0);
  kc::decoder_classifier_backward(dx.data(), dwte.data(), R.data(), x.data(), wte.data(), N, C, V, Vp);
  EXPECT_LT(gradient_error(f, x.data(), x.size(), dx.data()), kTol);
  EXPECT_LT(gradient_error(f, wte.data(), V * C, dwte.data()), kTol);
  for (int i = V * C; i < Vp * C; ++i) EXPECT_EQ(dwte[i], 0.0);
}

// Long sequences take the blocked path (query blocks of 64 meet only the keys up to their end):
// 150 positions cover two full blocks and a partial one. Forward against the textbook formula,
// backward against finite differences.
TEST(DecoderLayers, AttentionAcrossCausalBlocksMatchesTheFormula) {
  const int B = 2, T = 150, C = 8, NH = 2, hs = C / NH;
  auto qkv = random_vector(B * T * 3 * C, 26), R = random_vector(B * T * C, 27);
  std::vector<double> out(B * T * C), att(B * NH * T * T);
  kc::decoder_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  double worst = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        auto at = [&](int t2, int part, int i) { return qkv[(b * T + t2) * 3 * C + part * C + h * hs + i]; };
        std::vector<double> w(t + 1);
        double maxv = -1e300, sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          for (int i = 0; i < hs; ++i) w[t2] += at(t, 0, i) * at(t2, 1, i) / std::sqrt(double(hs));
          maxv = std::max(maxv, w[t2]);
        }
        for (auto& x : w) sum += x = std::exp(x - maxv);
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int t2 = 0; t2 <= t; ++t2) o += w[t2] / sum * at(t2, 2, i);
          worst = std::max(worst, std::abs(o - out[(b * T + t) * C + h * hs + i]));
        }
        for (int t2 = t + 1; t2 < T; ++t2) EXPECT_EQ(att[((b * NH + h) * T + t) * T + t2], 0.0);
      }
  EXPECT_LT(worst, 1e-12);
  auto f = [&] {
    kc::decoder_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  f();
  std::vector<double> dqkv(B * T * 3 * C);
  kc::decoder_attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  EXPECT_LT(gradient_error(f, qkv.data(), qkv.size(), dqkv.data(), 600), kTol);
}

TEST(DecoderLayers, GeluGradientAndKnownValues) {
  auto x = random_vector(50, 18, 2.0), R = random_vector(50, 19);
  std::vector<double> out(50);
  auto f = [&] {
    kc::decoder_gelu_forward(out.data(), x.data(), x.size());
    return dot(out, R);
  };
  std::vector<double> dx(50);
  kc::decoder_gelu_backward(dx.data(), x.data(), R.data(), x.size());
  EXPECT_LT(gradient_error(f, x.data(), x.size(), dx.data()), kTol);
  // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411919906082768
  EXPECT_NEAR(dsx::kernels::decoder::gelu_tanh(1.0), 0.8411919906082768, 1e-14);
  EXPECT_EQ(dsx::kernels::decoder::gelu_tanh(0.0), 0.0);
}

TEST(DecoderLayers, CrossEntropyGradientIgnoredRowsAndPadding) {
  const size_t N = 4;
  const int V = 5, Vp = 8;
  auto logits = random_vector(N * Vp, 20, 2.0);
  std::vector<int32_t> targets = {2, -1, 4, 0};
  std::vector<double> losses(N), lse(N);
  auto f = [&] {
    kc::decoder_crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V, Vp);
    return losses[0] + losses[1] + losses[2] + losses[3];
  };
  EXPECT_EQ(kc::decoder_crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V, Vp), 3u);
  EXPECT_EQ(losses[1], 0.0);
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += std::exp(logits[i]);
  EXPECT_NEAR(losses[0], std::log(sum) - logits[2], 1e-12);  // padded columns take no part
  auto grad = logits;
  kc::decoder_crossentropy_backward(grad.data(), lse.data(), targets.data(), 1.0, N, V, Vp);
  EXPECT_LT(gradient_error(f, logits.data(), logits.size(), grad.data()), kTol);
  for (size_t r = 0; r < N; ++r)
    for (int i = V; i < Vp; ++i) EXPECT_EQ(grad[r * Vp + i], 0.0);
  for (int i = 0; i < Vp; ++i) EXPECT_EQ(grad[Vp + i], 0.0);  // ignored row
}

TEST(DecoderLayers, FloatPathMatchesDoublePath) {
  const size_t N = 8;
  const int C = 16, OC = 12;
  auto xd = random_vector(N * C, 21), wd = random_vector(OC * C, 22), bd = random_vector(OC, 23);
  std::vector<float> xf(xd.begin(), xd.end()), wf(wd.begin(), wd.end()), bf(bd.begin(), bd.end());
  std::vector<double> od(N * OC);
  std::vector<float> of(N * OC);
  kc::decoder_matmul_forward(od.data(), xd.data(), wd.data(), bd.data(), N, C, OC);
  kc::decoder_matmul_forward(of.data(), xf.data(), wf.data(), bf.data(), N, C, OC);
  for (size_t i = 0; i < od.size(); ++i) EXPECT_NEAR(of[i], od[i], 1e-5 * (1 + std::abs(od[i])));
}

// Sizes above the serial cut-off run the OpenMP paths; they must agree with one thread.
TEST(DecoderLayers, ParallelPathsMatchOneThread) {
  const int B = 2, T = 128, C = 128, NH = 4;  // above the serial cut-off of every loop here
  const size_t N = B * T;
  auto qkv = random_vector(N * 3 * C, 30), R = random_vector(N * C, 31), w = random_vector(C, 32);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<double> out(N * C), att(B * NH * T * T), dqkv(N * 3 * C), ln(N * C), mean(N), rstd(N);
    std::vector<double> dx(N * C, 0), dw(C, 0), db(C, 0);
    kc::decoder_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    kc::decoder_attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
    kc::decoder_layernorm_forward(ln.data(), mean.data(), rstd.data(), out.data(), w.data(), w.data(), N, C);
    kc::decoder_layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), out.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
    out.insert(out.end(), dqkv.begin(), dqkv.end());
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
    // Matmuls big enough for the split path, forward with bias and all three gradients: with
    // fewer outputs than rows (the output is cut by rows) and more (cut by columns).
    for (int OC : {192, 320}) {
      std::vector<double> mm(N * OC), dmm_in(N * C), dmm_w(OC * C, 0), dmm_b(OC, 0);
      auto mw = random_vector(OC * C, 33), mb = random_vector(OC, 34), mg = random_vector(N * OC, 35);
      kc::decoder_matmul_forward(mm.data(), qkv.data(), mw.data(), mb.data(), N, C, OC);
      kc::decoder_matmul_backward(dmm_in.data(), dmm_w.data(), dmm_b.data(), mg.data(), qkv.data(), mw.data(), N,
                               C, OC);
      for (const auto* v : {&mm, &dmm_in, &dmm_w, &dmm_b}) out.insert(out.end(), v->begin(), v->end());
    }
    return out;
  };
  auto one = run(1), two = run(2);
  omp_set_num_threads(omp_get_num_procs());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(one[i], two[i], 1e-12 * (1 + std::abs(one[i]))) << i;
}
