// Llama-family layers on the CPU (see llama_layers.h): OpenMP loops over the shared formulas.
#include "kernels/cpu/llama_layers.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/llama_math.h"

namespace dsx::kernels::cpu {

namespace lm = dsx::kernels::llama;

namespace {

// As in decoder_layers.cpp: below this much work a parallel region costs more than it saves.
constexpr size_t kLayerParallelMin = size_t(1) << 18;

// f(n, cos, sin) for each of the B x Tn token rows with the rotation tables of its position, in
// parallel when the rows' work (`row_work` elements each) is large enough.
template <class T, class F>
void for_each_rotated_row(const T* cos, const T* sin, int B, int Tn, int D, size_t row_work, F f) {
  const size_t N = static_cast<size_t>(B) * Tn;
  const int half = D / 2;
#pragma omp parallel for if (N * row_work >= kLayerParallelMin)
  for (size_t n = 0; n < N; ++n) f(n, cos + (n % Tn) * half, sin + (n % Tn) * half);
}

}  // namespace

template <class T>
void llama_embedding_forward(T* out, const int32_t* tokens, const T* table, size_t N, int C) {
#pragma omp parallel for if (N * C >= kLayerParallelMin)
  for (size_t n = 0; n < N; ++n)
    std::copy_n(table + static_cast<size_t>(tokens[n]) * C, C, out + n * C);
}

template <class T>
void llama_embedding_backward(T* dtable, const T* dout, const int32_t* tokens, size_t N, int C) {
  // Two rows may hold the same token: parallel over channels, each walking the rows in order.
#pragma omp parallel for if (N * C >= kLayerParallelMin)
  for (int i = 0; i < C; ++i)
    for (size_t n = 0; n < N; ++n)
      dtable[static_cast<size_t>(tokens[n]) * C + i] += dout[n * C + i];
}

template <class T>
void llama_rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, size_t N, int C, T eps) {
#pragma omp parallel for if (N * C >= kLayerParallelMin)
  for (size_t r = 0; r < N; ++r) {
    const T* x = inp + r * C;
    T sq = 0;
    for (int i = 0; i < C; ++i) sq += x[i] * x[i];
    const T s = lm::rmsnorm_rstd(sq, C, eps);
    T* o = out + r * C;
    for (int i = 0; i < C; ++i) o[i] = lm::rmsnorm_out(lm::rmsnorm_xhat(x[i], s), weight[i]);
    rstd[r] = s;
  }
}

template <class T>
void llama_rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                            const T* rstd, size_t N, int C) {
  // dweight is a sum over rows: each thread sums a fixed block of rows into its own partial and
  // the partials are added in thread order, so the result does not depend on scheduling.
  const int threads = N * C >= kLayerParallelMin ? omp_get_max_threads() : 1;
  std::vector<T> partial(static_cast<size_t>(threads) * C, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (size_t r = 0; r < N; ++r) {
      const T* x = inp + r * C;
      const T* g = dout + r * C;
      const T s = rstd[r];
      T dot = 0;
      for (int i = 0; i < C; ++i) {
        const T xhat = lm::rmsnorm_xhat(x[i], s);
        dot += lm::rmsnorm_dnorm(g[i], weight[i]) * xhat;
        dw[i] += g[i] * xhat;
      }
      const T dot_mean = dot / T(C);
      T* d = dinp + r * C;
      for (int i = 0; i < C; ++i)
        d[i] += lm::rmsnorm_dinp_given(lm::rmsnorm_dnorm(g[i], weight[i]),
                                       lm::rmsnorm_xhat(x[i], s), dot_mean, s);
    }
  }
  if (!dweight) return;  // a frozen norm weight (LoRA): only the input gradient is wanted
  for (int th = 0; th < threads; ++th)
    for (int i = 0; i < C; ++i) dweight[i] += partial[static_cast<size_t>(th) * C + i];
}

template <class T>
void llama_qkv_pack_forward(T* qkv, const T* q, const T* k, const T* v, const T* cos, const T* sin,
                            int B, int Tn, int NH, int KV, int D) {
  const size_t QD = size_t(NH) * D, KVD = size_t(KV) * D;
  const int rep = NH / KV;
  for_each_rotated_row(cos, sin, B, Tn, D, 3 * QD, [&](size_t n, const T* c, const T* s) {
    T* row = qkv + n * 3 * QD;
    for (int h = 0; h < NH; ++h)
      lm::rope_forward(row + size_t(h) * D, q + n * QD + size_t(h) * D, c, s, D);
    for (int g = 0; g < KV; ++g) {
      T* k0 = row + QD + size_t(g) * rep * D;  // the group's first query head
      lm::rope_forward(k0, k + n * KVD + size_t(g) * D, c, s, D);
      for (int r = 1; r < rep; ++r) std::copy_n(k0, D, k0 + size_t(r) * D);
      const T* vg = v + n * KVD + size_t(g) * D;
      for (int r = 0; r < rep; ++r) std::copy_n(vg, D, row + 2 * QD + (size_t(g) * rep + r) * D);
    }
  });
}

template <class T>
void llama_qkv_pack_backward(T* dq, T* dk, T* dv, const T* dqkv, const T* cos, const T* sin, int B,
                             int Tn, int NH, int KV, int D) {
  const size_t QD = size_t(NH) * D, KVD = size_t(KV) * D;
  const int rep = NH / KV;
  for_each_rotated_row(cos, sin, B, Tn, D, 3 * QD, [&](size_t n, const T* c, const T* s) {
    const T* row = dqkv + n * 3 * QD;
    for (int h = 0; h < NH; ++h)
      lm::rope_backward(dq + n * QD + size_t(h) * D, row + size_t(h) * D, c, s, D);
    for (int g = 0; g < KV; ++g) {
      // The adjoint of repeating a kv head is the sum over its query heads; the rotation is linear,
      // so the sum is rotated back once.
      T* dkg = dk + n * KVD + size_t(g) * D;
      T* dvg = dv + n * KVD + size_t(g) * D;
      std::fill_n(dkg, D, T(0));
      std::fill_n(dvg, D, T(0));
      for (int r = 0; r < rep; ++r) {
        const size_t head = (size_t(g) * rep + r) * D;
        for (int j = 0; j < D; ++j) dkg[j] += row[QD + head + j], dvg[j] += row[2 * QD + head + j];
      }
      lm::rope_backward(dkg, dkg, c, s, D);
    }
  });
}

// The SIMD element loops (loops.h) with the vectorised exp: libm's scalar expf took about 3% of
// a Llama CPU step here.
template <class T>
void llama_swiglu_forward(T* h, const T* gate, const T* up, size_t n) {
  for_each_element(n, [=](size_t i) DSX_ALWAYS_INLINE {
    const T g = gate[i];
    h[i] = lm::swiglu_given(g, up[i], lm::sigmoid_given(vexp(-g)));
  });
}

template <class T>
void llama_swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, size_t n) {
  for_each_element(n, [=](size_t i) DSX_ALWAYS_INLINE {
    const T g = gate[i], d = dh[i], sig = lm::sigmoid_given(vexp(-g));
    dup[i] = lm::swiglu_dup_given(d, g, sig);
    dgate[i] = lm::swiglu_dgate_given(d, g, up[i], sig);
  });
}

#define DSX_LLAMA_LAYERS_INSTANTIATE(T)                                                           \
  template void llama_embedding_forward<T>(T*, const int32_t*, const T*, size_t, int);            \
  template void llama_embedding_backward<T>(T*, const T*, const int32_t*, size_t, int);           \
  template void llama_rmsnorm_forward<T>(T*, T*, const T*, const T*, size_t, int, T);             \
  template void llama_rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, size_t, \
                                          int);                                                   \
  template void llama_qkv_pack_forward<T>(T*, const T*, const T*, const T*, const T*, const T*,   \
                                          int, int, int, int, int);                               \
  template void llama_qkv_pack_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int,    \
                                           int, int, int);                                        \
  template void llama_swiglu_forward<T>(T*, const T*, const T*, size_t);                          \
  template void llama_swiglu_backward<T>(T*, T*, const T*, const T*, const T*, size_t);

DSX_LLAMA_LAYERS_INSTANTIATE(float)
DSX_LLAMA_LAYERS_INSTANTIATE(double)

}  // namespace dsx::kernels::cpu
