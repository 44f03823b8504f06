// Causal attention with bf16 operands (see bf16_attention.h). The layer's whole qkv (and in
// backward its output gradient) is rounded to bf16 in one pass, so each head's products read their
// q, k, v in place (rows 3C apart); then one (batch row, head) per task, as the fp32 kernel, with
// the products in blocks of kBlock query rows, each meeting only the keys it can see. A head's
// probabilities and scores' gradient are rounded a block of whole rows at a time: one cast call
// each, since per-row calls of 64 values cost more in dispatch than in work.
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

// The calling thread's bf16 copies of the layer's qkv and output gradient, read by every head.
struct LayerScratch {
  std::vector<uint16_t> qkv, dout;
};
LayerScratch& layer_scratch() {
  thread_local LayerScratch s;
  return s;
}

// One thread's (T, T) bf16 copies of a head's probabilities and scores' gradient.
struct HeadScratch {
  std::vector<uint16_t> p, dp;
};
HeadScratch& head_scratch() {
  thread_local HeadScratch s;
  return s;
}

const uint16_t* rounded(std::vector<uint16_t>& out, const float* in, size_t count) {
  if (out.size() < count) out.resize(count);
  to_bf16(out.data(), in, count);
  return out.data();
}

uint16_t* sized(std::vector<uint16_t>& v, size_t count) {
  if (v.size() < count) v.resize(count);
  return v.data();
}

// A head's operands: q, k, v rows 3C apart in the layer's bf16 qkv.
struct HeadView {
  const uint16_t *q, *k, *v;
  size_t ld;
};

// Scores of queries [r0, r1) against keys [0, r1), then each row's causal softmax in place (fp32).
void scores_softmax(float* a, const HeadView& x, int r0, int r1, int Tn, int hs, float scale) {
  gemm_bf16(false, true, size_t(r1 - r0), size_t(r1), size_t(hs), x.q + size_t(r0) * x.ld, x.ld,
            x.k, x.ld, false, a + size_t(r0) * Tn, size_t(Tn));
  for (int t = r0; t < r1; ++t) {
    float* row = a + size_t(t) * Tn;
    for (int t2 = 0; t2 <= t; ++t2) row[t2] *= scale;
    const float inv =
        decoder::softmax_inv_sum(row_exp_in_place(row, size_t(t) + 1, row_max(row, size_t(t) + 1)));
    for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
    std::fill(row + t + 1, row + Tn, 0.0f);  // the masked keys: zero weight, read by backward
  }
}

void head_forward(float* o, float* a, const HeadView& x, int Tn, int C, int hs, float scale) {
  const size_t t = size_t(Tn), h = size_t(hs);
  uint16_t* p16 = sized(head_scratch().p, t * t);
  for (int r0 = 0; r0 < Tn; r0 += kBlock) {
    const int r1 = std::min(Tn, r0 + kBlock);
    scores_softmax(a, x, r0, r1, Tn, hs, scale);
    // Whole rows, zeros past r1 included: one cast call.
    to_bf16(p16 + size_t(r0) * t, a + size_t(r0) * t, size_t(r1 - r0) * t);
    gemm_bf16(false, false, size_t(r1 - r0), h, size_t(r1), p16 + size_t(r0) * t, t, x.v, x.ld,
              false, o + size_t(r0) * C, size_t(C));
  }
}

// d loss / d scores of queries [r0, r1) into d (fp32, rows Tn apart), from d loss / d out (g16).
void scores_gradient(float* d, const float* a, const uint16_t* g16, const HeadView& x, int r0,
                     int r1, int Tn, int C, int hs, float scale) {
  gemm_bf16(false, true, size_t(r1 - r0), size_t(r1), size_t(hs), g16 + size_t(r0) * C, size_t(C),
            x.v, x.ld, false, d + size_t(r0) * Tn, size_t(Tn));
  for (int t = r0; t < r1; ++t) {
    const float* arow = a + size_t(t) * Tn;
    float* drow = d + size_t(t) * Tn;
    float dot = 0;
    for (int t2 = 0; t2 <= t; ++t2) dot += arow[t2] * drow[t2];
    for (int t2 = 0; t2 <= t; ++t2)
      drow[t2] = decoder::softmax_backward_given(arow[t2], drow[t2], dot) * scale;
    std::fill(drow + t + 1, drow + Tn, 0.0f);
  }
}

void head_backward(float* dq, const uint16_t* g16, const HeadView& x, const float* a, int Tn, int C,
                   int hs, float scale, std::vector<float>& d) {
  HeadScratch& s = head_scratch();
  const size_t C3 = 3 * size_t(C), t = size_t(Tn), h = size_t(hs);
  const uint16_t* a16 = rounded(s.p, a, t * t);
  uint16_t* d16 = sized(s.dp, t * t);
  for (int r0 = 0; r0 < Tn; r0 += kBlock) {  // dq = dscores @ k, block by block
    const int r1 = std::min(Tn, r0 + kBlock);
    scores_gradient(d.data(), a, g16, x, r0, r1, Tn, C, hs, scale);
    to_bf16(d16 + size_t(r0) * t, d.data() + size_t(r0) * t, size_t(r1 - r0) * t);
    gemm_bf16(false, false, size_t(r1 - r0), h, size_t(r1), d16 + size_t(r0) * t, t, x.k, x.ld,
              false, dq + size_t(r0) * C3, C3);
  }
  float *dk = dq + C, *dv = dq + 2 * C;
  // Key rows [c0, c1) are met by queries [c0, T) only: dv = a^T @ g, dk = dscores^T @ q.
  for (int c0 = 0; c0 < Tn; c0 += kBlock) {
    const size_t rows = size_t(std::min(Tn, c0 + kBlock) - c0), off = size_t(c0) * t + size_t(c0);
    gemm_bf16(true, false, rows, h, t - c0, a16 + off, t, g16 + size_t(c0) * C, size_t(C), false,
              dv + c0 * C3, C3);
    gemm_bf16(true, false, rows, h, t - c0, d16 + off, t, x.q + size_t(c0) * x.ld, x.ld, false,
              dk + c0 * C3, C3);
  }
}

HeadView head_of(const uint16_t* qkv16, int bh, int Tn, int C, int NH) {
  const size_t C3 = 3 * size_t(C);
  const uint16_t* q = qkv16 + size_t(bh / NH) * Tn * C3 + size_t(bh % NH) * (C / NH);
  return {q, q + C, q + 2 * C, C3};
}

}  // namespace

void decoder_attention_forward_bf16(float* out, float* att, const float* qkv, int B, int Tn, int C,
                                    int NH) {
  const int hs = C / NH;
  const float scale = decoder::attention_scale<float>(hs);
  const uint16_t* qkv16 = rounded(layer_scratch().qkv, qkv, size_t(B) * Tn * 3 * C);
#pragma omp parallel for schedule(dynamic, \
                                  1) if (size_t(B) * NH * Tn * Tn * hs / 2 >= kHeadsParallelMin)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    head_forward(out + size_t(b) * Tn * C + h * hs, att + size_t(bh) * Tn * Tn,
                 head_of(qkv16, bh, Tn, C, NH), Tn, C, hs, scale);
  }
}

void decoder_attention_backward_bf16(float* dqkv, const float* dout, const float* qkv,
                                     const float* att, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const float scale = decoder::attention_scale<float>(hs);
  const size_t C3 = 3 * size_t(C);
  LayerScratch& layer = layer_scratch();
  const uint16_t* qkv16 = rounded(layer.qkv, qkv, size_t(B) * Tn * C3);
  const uint16_t* dout16 = rounded(layer.dout, dout, size_t(B) * Tn * C);
#pragma omp parallel if (size_t(B) * NH * Tn * Tn * hs / 2 >= kHeadsParallelMin)
  {
    std::vector<float> d(size_t(Tn) * Tn);  // d loss / d scores, this thread's head
#pragma omp for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      head_backward(dqkv + size_t(b) * Tn * C3 + h * hs, dout16 + size_t(b) * Tn * C + h * hs,
                    head_of(qkv16, bh, Tn, C, NH), att + size_t(bh) * Tn * Tn, Tn, C, hs, scale, d);
    }
  }
}

}  // namespace dsx::kernels::cpu
