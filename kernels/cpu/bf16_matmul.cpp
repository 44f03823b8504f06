// Decoder matmuls with bf16 operands (see bf16_matmul.h). Each operand is rounded into a scratch
// buffer just before its product; the weights' copies cost 1/N of the product they feed.
#include "kernels/cpu/bf16_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/decoder_math.h"

namespace dsx::kernels::cpu {
namespace {

// bf16 copies of a layer's operands, kept between calls so a step allocates them once. One set
// per thread: the layers are called from the training thread only, but nothing here assumes it.
struct Bf16Operands {
  std::vector<uint16_t> a, b, c;
  std::vector<float> column_sums, dlogit_row, row_max, row_sum_exp;
};
Bf16Operands& scratch() {
  thread_local Bf16Operands s;
  return s;
}

// Rounds `rows` rows of `cols` values, `ld` apart, into a packed bf16 copy in `out`.
const uint16_t* rounded(std::vector<uint16_t>& out, const float* in, size_t rows, size_t cols,
                        size_t ld) {
  if (out.size() < rows * cols) out.resize(rows * cols);
  for (size_t r = 0; r < rows; ++r) to_bf16(out.data() + r * cols, in + r * ld, cols);
  return out.data();
}

// rounded(), and adds the copy's source column sums into `sums` (one row at a time, in row order:
// the same additions as add_column_sums) while each row is still in cache.
const uint16_t* rounded_adding_columns(std::vector<uint16_t>& out, std::vector<float>& column_sums,
                                       const float* in, size_t rows, size_t cols, float* sums) {
  if (out.size() < rows * cols) out.resize(rows * cols);
  column_sums.assign(cols, 0.0f);
  float* s = column_sums.data();
  for (size_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    to_bf16(out.data() + r * cols, row, cols);
    for (size_t j = 0; j < cols; ++j) s[j] += row[j];
  }
  for (size_t j = 0; j < cols; ++j) sums[j] += s[j];
  return out.data();
}

}  // namespace

void decoder_matmul_forward_bf16(float* out, const float* inp, const float* weight,
                                 const float* bias, size_t N, int C, int OC) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), oc = size_t(OC);
  const uint16_t* inp16 = rounded(s.a, inp, N, c, c);
  const uint16_t* w16 = rounded(s.b, weight, oc, c, c);
  if (bias)
    for (size_t r = 0; r < N; ++r) std::copy(bias, bias + oc, out + r * oc);
  gemm_bf16(false, true, N, oc, c, inp16, c, w16, c, bias != nullptr, out, oc);
}

void decoder_matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, size_t N, int C, int OC) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), oc = size_t(OC);
  // The bias gradient is dout's column sums, taken while dout is read for its bf16 copy.
  const uint16_t* dout16 = dbias ? rounded_adding_columns(s.c, s.column_sums, dout, N, oc, dbias)
                                 : rounded(s.c, dout, N, oc, oc);
  const uint16_t* w16 = rounded(s.b, weight, oc, c, c);
  gemm_bf16(false, false, N, c, oc, dout16, oc, w16, c, false, dinp, c);
  if (dweight) {  // null: a frozen weight (LoRA), whose product is skipped
    const uint16_t* inp16 = rounded(s.a, inp, N, c, c);
    gemm_bf16(true, false, oc, c, N, dout16, oc, inp16, c, true, dweight, c);
  }
}

// The classifier reads the first V rows of wte and the first V of Vp columns of logits. It runs
// in slices of kVocabSlice vocabulary rows so that the bf16 copies of wte and of the logits'
// gradient are one slice each, not the whole (V, C) and (N, V): at GPT-2's vocabulary those would
// be ~100 MiB more than the fp32 step's peak memory. A slice still feeds a GEMM of N x 2048 x C.
constexpr size_t kVocabSlice = 2048;

void decoder_classifier_forward_bf16(float* logits, const float* inp, const float* wte, size_t N,
                                     int C, int V, int Vp) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), v = size_t(V);
  const uint16_t* inp16 = rounded(s.a, inp, N, c, c);
  for (size_t v0 = 0; v0 < v; v0 += kVocabSlice) {
    const size_t rows = std::min(kVocabSlice, v - v0);
    const uint16_t* wte16 = rounded(s.b, wte + v0 * c, rows, c, c);
    gemm_bf16(false, true, N, rows, c, inp16, c, wte16, c, false, logits + v0, size_t(Vp));
  }
}

void decoder_classifier_backward_bf16(float* dinp, float* dwte, const float* dlogits,
                                      const float* inp, const float* wte, size_t N, int C, int V,
                                      int Vp) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), v = size_t(V);
  const uint16_t* inp16 = dwte ? rounded(s.a, inp, N, c, c) : nullptr;  // null: a frozen head
  for (size_t v0 = 0; v0 < v; v0 += kVocabSlice) {
    const size_t rows = std::min(kVocabSlice, v - v0);
    const uint16_t* dlogits16 = rounded(s.c, dlogits + v0, N, rows, size_t(Vp));
    const uint16_t* wte16 = rounded(s.b, wte + v0 * c, rows, c, c);
    gemm_bf16(false, false, N, c, rows, dlogits16, rows, wte16, c, v0 > 0, dinp, c);
    if (dwte) gemm_bf16(true, false, rows, c, N, dlogits16, rows, inp16, c, true, dwte + v0 * c, c);
  }
}

namespace {

// The bf16 copy of d loss / d logits for vocabulary columns [v0, v0 + cols): each row's
// exp(z - lse) * dloss, minus dloss at the target (decoder_crossentropy_backward's arithmetic),
// made in a row-sized fp32 scratch and rounded, so the fp32 logits are read once and never
// rewritten.
const uint16_t* dlogits_rounded(Bf16Operands& s, const float* logits, const float* lse,
                                const int32_t* targets, float dloss, size_t N, size_t v0,
                                size_t cols, size_t Vp) {
  if (s.c.size() < N * cols) s.c.resize(N * cols);
  s.dlogit_row.resize(cols);
  float* row = s.dlogit_row.data();
  for (size_t r = 0; r < N; ++r) {
    const int32_t y = targets[r];
    if (!decoder::crossentropy_counted(y)) {
      std::fill(row, row + cols, 0.0f);
    } else {
      row_exp_scale_into(row, logits + r * Vp + v0, cols, lse[r], dloss);
      if (size_t(y) >= v0 && size_t(y) < v0 + cols)
        row[size_t(y) - v0] = decoder::crossentropy_dlogit_given(row[size_t(y) - v0], true, dloss);
    }
    to_bf16(s.c.data() + r * cols, row, cols);
  }
  return s.c.data();
}

}  // namespace

void decoder_crossentropy_classifier_backward_bf16(float* dinp, float* dwte, const float* logits,
                                                   const float* lse, const int32_t* targets,
                                                   float dloss, const float* inp, const float* wte,
                                                   size_t N, int C, int V, int Vp) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), v = size_t(V);
  const uint16_t* inp16 = dwte ? rounded(s.a, inp, N, c, c) : nullptr;  // null: a frozen head
  for (size_t v0 = 0; v0 < v; v0 += kVocabSlice) {
    const size_t rows = std::min(kVocabSlice, v - v0);
    const uint16_t* dlogits16 =
        dlogits_rounded(s, logits, lse, targets, dloss, N, v0, rows, size_t(Vp));
    const uint16_t* wte16 = rounded(s.b, wte + v0 * c, rows, c, c);
    gemm_bf16(false, false, N, c, rows, dlogits16, rows, wte16, c, v0 > 0, dinp, c);
    if (dwte) gemm_bf16(true, false, rows, c, N, dlogits16, rows, inp16, c, true, dwte + v0 * c, c);
  }
}

// Each row's running max M and sum S of exp(z - M) over the slices seen, taking in slice z[0, n):
// a larger max rescales the sum so far by exp(M_old - M_new) (the online softmax).
void take_slice(float& M, float& S, const float* z, size_t n) {
  const float m = row_max(z, n);
  if (m > M) {
    S = S * std::exp(M - m) + row_sum_exp(z, n, m);  // exp(-inf) = 0 on the first slice
    M = m;
  } else {
    S += row_sum_exp(z, n, M);
  }
}

size_t decoder_classifier_crossentropy_forward_bf16(float* logits, float* losses, float* lse,
                                                    const float* inp, const float* wte,
                                                    const int32_t* targets, size_t N, int C, int V,
                                                    int Vp) {
  Bf16Operands& s = scratch();
  const size_t c = size_t(C), v = size_t(V), vp = size_t(Vp);
  const uint16_t* inp16 = rounded(s.a, inp, N, c, c);
  s.row_max.assign(N, -std::numeric_limits<float>::infinity());
  s.row_sum_exp.assign(N, 0.0f);
  for (size_t v0 = 0; v0 < v; v0 += kVocabSlice) {
    const size_t rows = std::min(kVocabSlice, v - v0);
    const uint16_t* wte16 = rounded(s.b, wte + v0 * c, rows, c, c);
    gemm_bf16(false, true, N, rows, c, inp16, c, wte16, c, false, logits + v0, vp);
    for (size_t r = 0; r < N; ++r)
      take_slice(s.row_max[r], s.row_sum_exp[r], logits + r * vp + v0, rows);
  }
  size_t counted = 0;
  for (size_t r = 0; r < N; ++r) {
    const int32_t y = targets[r];
    lse[r] = decoder::logsumexp_given(s.row_max[r], s.row_sum_exp[r]);
    losses[r] = decoder::crossentropy_loss(lse[r], y, [&] { return logits[r * vp + size_t(y)]; });
    counted += decoder::crossentropy_counted(y);
  }
  return counted;
}

}  // namespace dsx::kernels::cpu
