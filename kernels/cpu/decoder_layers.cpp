// The decoder layers on the CPU (see decoder_layers.h): BLAS for matmuls and attention, OpenMP loops for
// the rest.
#include "kernels/cpu/decoder_layers.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/decoder_math.h"

namespace dsx::kernels::cpu {

namespace {

// Loops over less work than this run on the calling thread: a parallel region costs more than
// it saves on small tensors, and far more on a loaded machine, where every barrier waits for
// a descheduled thread.
constexpr size_t kLayerParallelMin = size_t(1) << 18;

}  // namespace

template <class T>
void decoder_positional_embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                          int C) {
#pragma omp parallel for collapse(2) if (size_t(B) * Tn * C >= kLayerParallelMin)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      T* o = out + (static_cast<size_t>(b) * Tn + t) * C;
      const T* e = wte + static_cast<size_t>(tokens[b * Tn + t]) * C;
      const T* p = wpe + static_cast<size_t>(t) * C;
      for (int i = 0; i < C; ++i) o[i] = e[i] + p[i];
    }
  }
}

template <class T>
void decoder_positional_embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn,
                           int C) {
  // A null table is frozen (LoRA): nothing is added to it. Serial over rows: two rows may hold the same token. Parallel over channels instead.
#pragma omp parallel for if (size_t(B) * Tn * C >= kLayerParallelMin)
  for (int i = 0; i < C; ++i) {
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < Tn; ++t) {
        T d = dout[(static_cast<size_t>(b) * Tn + t) * C + i];
        if (dwte) dwte[static_cast<size_t>(tokens[b * Tn + t]) * C + i] += d;
        if (dwpe) dwpe[static_cast<size_t>(t) * C + i] += d;
      }
    }
  }
}

template <class T>
void decoder_layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                            size_t N, int C) {
#pragma omp parallel for if (N * C >= kLayerParallelMin)
  for (size_t r = 0; r < N; ++r) {
    const T* x = inp + r * C;
    T sum = 0;
    for (int i = 0; i < C; ++i) sum += x[i];
    const T m = decoder::layernorm_mean(sum, C);
    T v = 0;
    for (int i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    const T s = decoder::layernorm_rstd(v, C);
    T* o = out + r * C;
    for (int i = 0; i < C; ++i)
      o[i] = decoder::layernorm_affine(decoder::layernorm_xhat(x[i], m, s), weight[i], bias[i]);
    mean[r] = m;
    rstd[r] = s;
  }
}

template <class T>
void decoder_layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                             const T* weight, const T* mean, const T* rstd, size_t N, int C) {
  // dweight/dbias are sums over rows: each thread sums a fixed block of rows into its own
  // partial, and the partials are added in thread order, so results are bitwise reproducible.
  const int threads = N * C >= kLayerParallelMin ? omp_get_max_threads() : 1;
  std::vector<T> partial(static_cast<size_t>(threads) * 2 * C, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C;
    T* db = dw + C;
#pragma omp for schedule(static)
    for (size_t r = 0; r < N; ++r) {
      const T* x = inp + r * C;
      const T* g = dout + r * C;
      T m = mean[r], s = rstd[r];
      T g_mean = 0, g_xhat_mean = 0;
      for (int i = 0; i < C; ++i) {
        T xhat = decoder::layernorm_xhat(x[i], m, s);
        T gx = decoder::layernorm_dnorm(g[i], weight[i]);
        g_mean += gx;
        g_xhat_mean += gx * xhat;
        dw[i] += g[i] * xhat;
        db[i] += g[i];
      }
      g_mean = decoder::layernorm_mean(g_mean, C);
      g_xhat_mean = decoder::layernorm_mean(g_xhat_mean, C);
      T* d = dinp + r * C;
      for (int i = 0; i < C; ++i)
        d[i] += decoder::layernorm_dinp_given(decoder::layernorm_dnorm(g[i], weight[i]),
                                           decoder::layernorm_xhat(x[i], m, s), g_mean, g_xhat_mean,
                                           s);
    }
  }
  for (int th = 0; th < threads; ++th) {
    const T* dw = partial.data() + static_cast<size_t>(th) * 2 * C;
    for (int i = 0; i < C; ++i) {  // null: a frozen norm (LoRA)
      if (dweight) dweight[i] += dw[i];
      if (dbias) dbias[i] += dw[C + i];
    }
  }
}

// The matmul layers run in one parallel region each: every thread fills its slice of the output
// (bias, then product) and, in backward, its slices of all three gradients, with no barrier in
// between. A step opens ~145 regions; on a shared machine each barrier can wait for a thread the
// scheduler has put aside, so fewer is better.
template <class T>
void decoder_matmul_forward(T* out, const T* inp, const T* weight, const T* bias, size_t N, int C,
                         int OC) {
  const T beta = bias ? T(1) : T(0);
  auto fill_bias = [&](const GemmSlice& s) {  // the bias in C's slice, which the product adds to
    if (!bias || s.begin >= s.end) return;
    const size_t r0 = s.by_rows ? s.begin : 0, r1 = s.by_rows ? s.end : N;
    const size_t c0 = s.by_rows ? 0 : s.begin, c1 = s.by_rows ? OC : s.end;
    for (size_t r = r0; r < r1; ++r) std::copy(bias + c0, bias + c1, out + r * OC + c0);
  };
  if (!gemm_is_split(N, OC, C)) {
    fill_bias({true, 0, N});
    gemm_serial(false, true, N, OC, C, T(1), inp, C, weight, C, beta, out, OC);
    return;
  }
  SingleThreadedBlas single;
#pragma omp parallel
  {
    const int parts = gemm_parts(N, OC, omp_get_num_threads());
#pragma omp for schedule(dynamic, 1)
    for (int part = 0; part < parts; ++part) {
      GemmSlice s = gemm_slice(N, OC, part, parts);
      fill_bias(s);
      gemm_part(s, false, true, N, OC, C, T(1), inp, C, weight, C, beta, out, OC);
    }
  }
}

// Walks the rows in order: contiguous loads that vectorise across columns, each column still
// summed over rows 0, 1, ... as a plain loop.
template <class T>
void add_column_sums(T* dbias, const T* dout, size_t N, int OC, int o0, int o1) {
  constexpr int kCols = 64;
  for (int b0 = o0; b0 < o1; b0 += kCols) {
    const int width = std::min(kCols, o1 - b0);
    T s[kCols] = {};
    for (size_t r = 0; r < N; ++r) {
      const T* row = dout + r * OC + b0;
      for (int j = 0; j < width; ++j) s[j] += row[j];
    }
    for (int j = 0; j < width; ++j) dbias[b0 + j] += s[j];
  }
}

template <class T>
void decoder_matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, size_t N, int C, int OC) {
  if (!gemm_is_split(N, C, OC)) {
    gemm_serial(false, false, N, C, OC, T(1), dout, OC, weight, C, T(0), dinp, C);
    if (dweight) gemm_serial(true, false, OC, C, N, T(1), dout, OC, inp, C, T(1), dweight, C);
    if (dbias) add_column_sums(dbias, dout, N, OC, 0, OC);
    return;
  }
  SingleThreadedBlas single;
#pragma omp parallel
  {
    const int threads = omp_get_num_threads();
    // A frozen weight (LoRA) has no gradient: its product is skipped.
    const int in_parts = gemm_parts(N, C, threads), w_parts = dweight ? gemm_parts(OC, C, threads) : 0;
#pragma omp for schedule(dynamic, 1) nowait
    for (int part = 0; part < in_parts; ++part)
      gemm_part(gemm_slice(N, C, part, in_parts), false, false, N, C, OC, T(1), dout, OC, weight, C,
                T(0), dinp, C);
#pragma omp for schedule(dynamic, 1) nowait
    for (int part = 0; part < w_parts; ++part)
      gemm_part(gemm_slice(OC, C, part, w_parts), true, false, OC, C, N, T(1), dout, OC, inp, C,
                T(1), dweight, C);
    if (dbias) {
#pragma omp for schedule(dynamic, 1)
      for (int o0 = 0; o0 < OC; o0 += 64)
        add_column_sums(dbias, dout, N, OC, o0, std::min(OC, o0 + 64));
    }
  }
}

template <class T>
void decoder_classifier_forward(T* logits, const T* inp, const T* wte, size_t N, int C, int V,
                             int Vp) {
  gemm(false, true, N, V, C, T(1), inp, C, wte, C, T(0), logits, Vp);
}

template <class T>
void decoder_classifier_backward(T* dinp, T* dwte, const T* dlogits, const T* inp, const T* wte,
                              size_t N, int C, int V, int Vp) {
  gemm(false, false, N, C, V, T(1), dlogits, Vp, wte, C, T(0), dinp, C);
  if (dwte) gemm(true, false, V, C, N, T(1), dlogits, Vp, inp, C, T(1), dwte, C);
}

// Attention runs one (batch row, head) per task, each thread with its own single-threaded GEMMs
// on the head's slices of qkv (row stride 3C). The causal mask is exploited in blocks of
// kAttBlock query rows: block [r0, r1) only meets keys [0, r1), so 5/8 of the full T x T
// products are computed for T = 256 instead of all of them.
namespace {
constexpr int kAttBlock = 64;
}  // namespace

template <class T>
void decoder_attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = decoder::attention_scale<T>(hs);
  const size_t C3 = 3 * static_cast<size_t>(C);
  const bool parallel = size_t(B) * NH * Tn * Tn * hs / 2 >= kLayerParallelMin;
  SingleThreadedBlas single;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + static_cast<size_t>(b) * Tn * C3 + h * hs;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* a = att + static_cast<size_t>(bh) * Tn * Tn;
    T* o = out + static_cast<size_t>(b) * Tn * C + h * hs;
    for (int r0 = 0; r0 < Tn; r0 += kAttBlock) {
      const int r1 = std::min(Tn, r0 + kAttBlock);
      // scores of queries [r0, r1) against keys [0, r1)
      gemm_serial(false, true, r1 - r0, r1, hs, scale, q + r0 * C3, C3, k, C3, T(0),
                  a + size_t(r0) * Tn, Tn);
      for (int t = r0; t < r1; ++t) {
        T* row = a + static_cast<size_t>(t) * Tn;
        T inv = decoder::softmax_inv_sum(row_exp_in_place(row, t + 1, row_max(row, t + 1)));
        for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
        std::fill(row + t + 1, row + Tn, T(0));  // the masked keys: zero weight, read by backward
      }
      gemm_serial(false, false, r1 - r0, hs, r1, T(1), a + size_t(r0) * Tn, Tn, v, C3, T(0),
                  o + r0 * size_t(C), size_t(C));
    }
  }
}

template <class T>
void decoder_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn,
                             int C, int NH) {
  const int hs = C / NH;
  const T scale = decoder::attention_scale<T>(hs);
  const size_t C3 = 3 * static_cast<size_t>(C);
  SingleThreadedBlas single;
#pragma omp parallel if (size_t(B) * NH * Tn * Tn * hs / 2 >= kLayerParallelMin)
  {
    std::vector<T> dpre(static_cast<size_t>(Tn) * Tn);  // d loss / d scores, this thread's head
#pragma omp for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      const size_t base = static_cast<size_t>(b) * Tn * C3 + h * hs;
      const T *q = qkv + base, *k = q + C, *v = q + 2 * C;
      T *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
      const T* a = att + static_cast<size_t>(bh) * Tn * Tn;
      const T* g = dout + static_cast<size_t>(b) * Tn * C + h * hs;
      T* d = dpre.data();
      for (int r0 = 0; r0 < Tn; r0 += kAttBlock) {
        const int r1 = std::min(Tn, r0 + kAttBlock);
        // out = a @ v: d a = g @ v^T over keys [0, r1)
        gemm_serial(false, true, r1 - r0, r1, hs, T(1), g + r0 * size_t(C), size_t(C), v, C3, T(0),
                    d + size_t(r0) * Tn, Tn);
        // softmax backward: dpre = a * (da - sum(a * da)) * scale; zero on masked keys
        for (int t = r0; t < r1; ++t) {
          const T* arow = a + static_cast<size_t>(t) * Tn;
          T* drow = d + static_cast<size_t>(t) * Tn;
          T dot = 0;
          for (int t2 = 0; t2 <= t; ++t2) dot += arow[t2] * drow[t2];
          for (int t2 = 0; t2 <= t; ++t2)
            drow[t2] = decoder::softmax_backward_given(arow[t2], drow[t2], dot) * scale;
          std::fill(drow + t + 1, drow + r1, T(0));
        }
        // scores = q @ k^T: dq = dpre @ k
        gemm_serial(false, false, r1 - r0, hs, r1, T(1), d + size_t(r0) * Tn, Tn, k, C3, T(0),
                    dq + r0 * C3, C3);
      }
      // Key rows [c0, c1) are met by queries [c0, T) only: dv = a^T @ g, dk = dpre^T @ q.
      for (int c0 = 0; c0 < Tn; c0 += kAttBlock) {
        const int c1 = std::min(Tn, c0 + kAttBlock);
        const size_t off = size_t(c0) * Tn + c0;
        gemm_serial(true, false, c1 - c0, hs, Tn - c0, T(1), a + off, Tn, g + c0 * size_t(C),
                    size_t(C), T(0), dv + c0 * C3, C3);
        gemm_serial(true, false, c1 - c0, hs, Tn - c0, T(1), d + off, Tn, q + c0 * C3, C3, T(0),
                    dk + c0 * C3, C3);
      }
    }
  }
}

template <class T>
void decoder_gelu_forward(T* out, const T* inp, size_t n) {
  for_each_element(n, [=](size_t i) DSX_ALWAYS_INLINE {
    T x = inp[i];
    out[i] = decoder::gelu_tanh_given(x, vtanh(decoder::gelu_tanh_arg(x)));
  });
}

template <class T>
void decoder_gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  for_each_element(n, [=](size_t i) DSX_ALWAYS_INLINE {
    T x = inp[i];
    dinp[i] = decoder::gelu_tanh_grad_given(x, vtanh(decoder::gelu_tanh_arg(x))) * dout[i];
  });
}

template <class T>
void decoder_residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for if (n >= kLayerParallelMin)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
size_t decoder_crossentropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets,
                                 size_t N, int V, int Vp) {
  size_t counted = 0;
#pragma omp parallel for reduction(+ : counted) if (N * V >= kLayerParallelMin)
  for (size_t r = 0; r < N; ++r) {
    const T* z = logits + r * Vp;
    T maxv = row_max(z, V);
    lse[r] = decoder::logsumexp_given(maxv, row_sum_exp(z, V, maxv));
    const int32_t y = targets[r];
    losses[r] = decoder::crossentropy_loss(lse[r], y, [&] { return z[y]; });
    counted += decoder::crossentropy_counted(y);
  }
  return counted;
}

template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const T* lse, const int32_t* targets, T dloss,
                                size_t N, int V, int Vp) {
#pragma omp parallel for if (N * V >= kLayerParallelMin)
  for (size_t r = 0; r < N; ++r) {
    T* z = logits_to_dlogits + r * Vp;
    const int32_t y = targets[r];
    if (!decoder::crossentropy_counted(y)) {
      std::fill(z, z + Vp, T(0));
      continue;
    }
    row_exp_scale(z, V, lse[r], dloss);  // exp(z - lse) * dloss: every entry but the target's
    z[y] = decoder::crossentropy_dlogit_given(z[y], true, dloss);
    std::fill(z + V, z + Vp, T(0));
  }
}

#define DSX_DECODER_INSTANTIATE(T)                                                                   \
  template void decoder_positional_embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int);   \
  template void decoder_positional_embedding_backward<T>(T*, T*, const T*, const int32_t*, int, int, int);        \
  template void decoder_layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, size_t, int); \
  template void decoder_layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                           const T*, size_t, int);                                \
  template void add_column_sums<T>(T*, const T*, size_t, int, int, int);                             \
  template void decoder_matmul_forward<T>(T*, const T*, const T*, const T*, size_t, int, int);       \
  template void decoder_matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, size_t, int,    \
                                        int);                                                     \
  template void decoder_classifier_forward<T>(T*, const T*, const T*, size_t, int, int, int);        \
  template void decoder_classifier_backward<T>(T*, T*, const T*, const T*, const T*, size_t, int,    \
                                            int, int);                                            \
  template void decoder_attention_forward<T>(T*, T*, const T*, int, int, int, int);                  \
  template void decoder_attention_backward<T>(T*, const T*, const T*, const T*, int, int, int, int); \
  template void decoder_gelu_forward<T>(T*, const T*, size_t);                                       \
  template void decoder_gelu_backward<T>(T*, const T*, const T*, size_t);                            \
  template void decoder_residual_forward<T>(T*, const T*, const T*, size_t);                         \
  template size_t decoder_crossentropy_forward<T>(T*, T*, const T*, const int32_t*, size_t, int,     \
                                               int);                                              \
  template void decoder_crossentropy_backward<T>(T*, const T*, const int32_t*, T, size_t, int, int);

DSX_DECODER_INSTANTIATE(float)
DSX_DECODER_INSTANTIATE(double)

}  // namespace dsx::kernels::cpu
