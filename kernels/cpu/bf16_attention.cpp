// Causal attention with bf16 operands (see bf16_attention.h). One (batch row, head) per task, as
// the fp32 kernel: its q, k, v (and in backward its output gradient, probabilities and scores'
// gradient) are rounded once into packed (T, head size) or (T, T) bf16 copies, then the products
// run in blocks of kBlock query rows, each meeting only the keys it can see.
#include "kernels/cpu/bf16_attention.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/decoder_math.h"

namespace dsx::kernels::cpu {
namespace {

constexpr int kBlock = 64;
// Heads run in parallel only when there is enough work; see decoder_layers.cpp.
constexpr size_t kHeadsParallelMin = size_t(1) << 18;

// One thread's bf16 copies of a head's operands, kept between calls.
struct HeadScratch {
  std::vector<uint16_t> q, k, v, g, p, dp;
};
HeadScratch& scratch() {
  thread_local HeadScratch s;
  return s;
}

// Rounds a (rows, cols) block whose rows are `ld` apart into packed bf16.
uint16_t* packed(std::vector<uint16_t>& out, const float* in, size_t rows, size_t cols, size_t ld) {
  if (out.size() < rows * cols) out.resize(rows * cols);
  for (size_t r = 0; r < rows; ++r) to_bf16(out.data() + r * cols, in + r * ld, cols);
  return out.data();
}

// Scores of queries [r0, r1) against keys [0, r1), then each row's causal softmax in place (fp32).
void scores_softmax(float* a, const uint16_t* q, const uint16_t* k, int r0, int r1, int Tn, int hs, float scale) {
  gemm_bf16(false, true, size_t(r1 - r0), size_t(r1), size_t(hs), q + size_t(r0) * hs, size_t(hs), k, size_t(hs),
            false, a + size_t(r0) * Tn, size_t(Tn));
  for (int t = r0; t < r1; ++t) {
    float* row = a + size_t(t) * Tn;
    for (int t2 = 0; t2 <= t; ++t2) row[t2] *= scale;
    const float inv = decoder::softmax_inv_sum(row_exp_in_place(row, size_t(t) + 1, row_max(row, size_t(t) + 1)));
    for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
    std::fill(row + t + 1, row + Tn, 0.0f);  // the masked keys: zero weight, read by backward
  }
}

void head_forward(float* o, float* a, const float* q, int Tn, int C, int hs, float scale) {
  HeadScratch& s = scratch();
  const size_t C3 = 3 * size_t(C), t = size_t(Tn), h = size_t(hs);
  const uint16_t* q16 = packed(s.q, q, t, h, C3);
  const uint16_t* k16 = packed(s.k, q + C, t, h, C3);
  const uint16_t* v16 = packed(s.v, q + 2 * C, t, h, C3);
  for (int r0 = 0; r0 < Tn; r0 += kBlock) {
    const int r1 = std::min(Tn, r0 + kBlock);
    scores_softmax(a, q16, k16, r0, r1, Tn, hs, scale);
    const uint16_t* p16 = packed(s.p, a + size_t(r0) * t, size_t(r1 - r0), size_t(r1), t);
    gemm_bf16(false, false, size_t(r1 - r0), h, size_t(r1), p16, size_t(r1), v16, h, false, o + size_t(r0) * C,
              size_t(C));
  }
}

// d loss / d scores of queries [r0, r1) into d (fp32, rows Tn apart), from d loss / d out (g16).
void scores_gradient(float* d, const float* a, const uint16_t* g16, const uint16_t* v16, int r0, int r1, int Tn,
                     int hs, float scale) {
  gemm_bf16(false, true, size_t(r1 - r0), size_t(r1), size_t(hs), g16 + size_t(r0) * hs, size_t(hs), v16,
            size_t(hs), false, d + size_t(r0) * Tn, size_t(Tn));
  for (int t = r0; t < r1; ++t) {
    const float* arow = a + size_t(t) * Tn;
    float* drow = d + size_t(t) * Tn;
    float dot = 0;
    for (int t2 = 0; t2 <= t; ++t2) dot += arow[t2] * drow[t2];
    for (int t2 = 0; t2 <= t; ++t2) drow[t2] = decoder::softmax_backward_given(arow[t2], drow[t2], dot) * scale;
    std::fill(drow + t + 1, drow + Tn, 0.0f);
  }
}

void head_backward(float* dq, const float* g, const float* q, const float* a, int Tn, int C, int hs, float scale,
                   std::vector<float>& d) {
  HeadScratch& s = scratch();
  const size_t C3 = 3 * size_t(C), t = size_t(Tn), h = size_t(hs);
  const uint16_t* q16 = packed(s.q, q, t, h, C3);
  const uint16_t* k16 = packed(s.k, q + C, t, h, C3);
  const uint16_t* v16 = packed(s.v, q + 2 * C, t, h, C3);
  const uint16_t* g16 = packed(s.g, g, t, h, size_t(C));
  const uint16_t* a16 = packed(s.p, a, t, t, t);
  for (int r0 = 0; r0 < Tn; r0 += kBlock) {  // dq = dscores @ k, block by block
    const int r1 = std::min(Tn, r0 + kBlock);
    scores_gradient(d.data(), a, g16, v16, r0, r1, Tn, hs, scale);
    const uint16_t* dp16 = packed(s.dp, d.data() + size_t(r0) * t, size_t(r1 - r0), size_t(r1), t);
    gemm_bf16(false, false, size_t(r1 - r0), h, size_t(r1), dp16, size_t(r1), k16, h, false, dq + size_t(r0) * C3,
              C3);
  }
  const uint16_t* d16 = packed(s.dp, d.data(), t, t, t);
  float *dk = dq + C, *dv = dq + 2 * C;
  // Key rows [c0, c1) are met by queries [c0, T) only: dv = a^T @ g, dk = dscores^T @ q.
  for (int c0 = 0; c0 < Tn; c0 += kBlock) {
    const size_t rows = size_t(std::min(Tn, c0 + kBlock) - c0), off = size_t(c0) * t + size_t(c0);
    gemm_bf16(true, false, rows, h, t - c0, a16 + off, t, g16 + size_t(c0) * h, h, false, dv + c0 * C3, C3);
    gemm_bf16(true, false, rows, h, t - c0, d16 + off, t, q16 + size_t(c0) * h, h, false, dk + c0 * C3, C3);
  }
}

}  // namespace

void decoder_attention_forward_bf16(float* out, float* att, const float* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const float scale = decoder::attention_scale<float>(hs);
  const size_t C3 = 3 * size_t(C);
#pragma omp parallel for schedule(dynamic, 1) if (size_t(B) * NH * Tn * Tn * hs / 2 >= kHeadsParallelMin)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    head_forward(out + size_t(b) * Tn * C + h * hs, att + size_t(bh) * Tn * Tn, qkv + size_t(b) * Tn * C3 + h * hs,
                 Tn, C, hs, scale);
  }
}

void decoder_attention_backward_bf16(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                                     int Tn, int C, int NH) {
  const int hs = C / NH;
  const float scale = decoder::attention_scale<float>(hs);
  const size_t C3 = 3 * size_t(C);
#pragma omp parallel if (size_t(B) * NH * Tn * Tn * hs / 2 >= kHeadsParallelMin)
  {
    std::vector<float> d(size_t(Tn) * Tn);  // d loss / d scores, this thread's head
#pragma omp for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      const size_t base = size_t(b) * Tn * C3 + h * hs;
      head_backward(dqkv + base, dout + size_t(b) * Tn * C + h * hs, qkv + base, att + size_t(bh) * Tn * Tn, Tn, C,
                    hs, scale, d);
    }
  }
}

}  // namespace dsx::kernels::cpu
