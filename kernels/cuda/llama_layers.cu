// Llama-family layer kernels on the GPU (see llama_layers.h), over kernels/llama_math.h.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/llama_layers.h"
#include "kernels/cuda/warp_rows.cuh"
#include "kernels/llama_math.h"

namespace dsx::kernels::cuda {

namespace {

namespace lm = dsx::kernels::llama;

#define DSX_GRID_STRIDE(i, n)                                             \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += size_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* table, int C,
                                         size_t n) {
  DSX_GRID_STRIDE(i, n) out[i] = table[size_t(tokens[i / C]) * C + i % C];
}

// One warp per row.
template <class T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, size_t N,
                                       int C, float eps) {
  const size_t row = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  float sq = 0;
  for (int i = lane; i < C; i += kWarp) sq += to_f(x[i]) * to_f(x[i]);
  const float r = lm::rmsnorm_rstd(warp_sum(sq), C, eps);
  for (int i = lane; i < C; i += kWarp)
    out[row * C + i] = from_f<T>(lm::rmsnorm_out(lm::rmsnorm_xhat(to_f(x[i]), r), to_f(weight[i])));
  if (lane == 0) rstd[row] = r;
}

// dinp only, one warp per row; the weight gradient is a column sum (RmsNormWeightTerm).
template <class T>
__global__ void rmsnorm_backward_kernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                        const float* rstd, size_t N, int C) {
  const size_t row = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* g = dout + row * C;
  const float r = rstd[row];
  float dot = 0;
  for (int i = lane; i < C; i += kWarp)
    dot += lm::rmsnorm_dnorm(to_f(g[i]), to_f(weight[i])) * lm::rmsnorm_xhat(to_f(x[i]), r);
  const float dot_mean = warp_sum(dot) / float(C);
  for (int i = lane; i < C; i += kWarp) {
    const float d = lm::rmsnorm_dinp_given(lm::rmsnorm_dnorm(to_f(g[i]), to_f(weight[i])),
                                           lm::rmsnorm_xhat(to_f(x[i]), r), dot_mean, r);
    dinp[row * C + i] = from_f<T>(to_f(dinp[row * C + i]) + d);
  }
}

// The weight gradient's term: dout * x_hat.
template <class T>
struct RmsNormWeightTerm {
  const T* dout;
  const T* inp;
  const float* rstd;
  int C;
  __device__ float operator()(size_t r, int c) const {
    return to_f(dout[r * C + c]) * lm::rmsnorm_xhat(to_f(inp[r * C + c]), rstd[r]);
  }
};

// Where one thread's rotary pair is: row n, head h, frequency j of D/2, and its angle's cos/sin.
struct RopeSite {
  size_t n;
  int h, j;
  float cos, sin;
  __device__ RopeSite(size_t i, int H, int half, int Tn, const float* cos_table,
                      const float* sin_table)
      : n(i / half / H), h(static_cast<int>((i / half) % H)), j(static_cast<int>(i % half)) {
    const size_t at = (n % Tn) * half + j;
    cos = cos_table[at], sin = sin_table[at];
  }
};

// Rotates the pair (j, j + half) of the head vector at src into dst (which may be src).
template <class T>
__device__ void rope_pair_to(T* dst, const T* src, int j, int half, float c, float s) {
  float a, b;
  lm::rope_pair_forward(a, b, to_f(src[j]), to_f(src[j + half]), c, s);
  dst[j] = from_f<T>(a), dst[j + half] = from_f<T>(b);
}

// One thread per (row, query head, pair): q rotated, the head's kv group's k rotated and v copied.
template <class T>
__global__ void qkv_pack_forward_kernel(T* qkv, const T* q, const T* k, const T* v,
                                        const float* cos, const float* sin, size_t n, int Tn,
                                        int NH, int KV, int D) {
  const int half = D / 2, rep = NH / KV;
  const size_t QD = size_t(NH) * D, KVD = size_t(KV) * D;
  DSX_GRID_STRIDE(i, n) {
    const RopeSite at(i, NH, half, Tn, cos, sin);
    T* row = qkv + at.n * 3 * QD + size_t(at.h) * D;
    const size_t g = size_t(at.h / rep) * D;
    rope_pair_to(row, q + at.n * QD + size_t(at.h) * D, at.j, half, at.cos, at.sin);
    rope_pair_to(row + QD, k + at.n * KVD + g, at.j, half, at.cos, at.sin);
    row[2 * QD + at.j] = v[at.n * KVD + g + at.j];
    row[2 * QD + at.j + half] = v[at.n * KVD + g + at.j + half];
  }
}

// One thread per (row, query head, pair): dq turned back; the group's first head also sums dk and
// dv over the group's heads in order and turns dk back once (the rotation is linear).
template <class T>
__global__ void qkv_pack_backward_kernel(T* dq, T* dk, T* dv, const T* dqkv, const float* cos,
                                         const float* sin, size_t n, int Tn, int NH, int KV,
                                         int D) {
  const int half = D / 2, rep = NH / KV;
  const size_t QD = size_t(NH) * D, KVD = size_t(KV) * D;
  DSX_GRID_STRIDE(i, n) {
    const RopeSite at(i, NH, half, Tn, cos, sin);
    const T* row = dqkv + at.n * 3 * QD;
    const size_t head = size_t(at.h) * D;
    float a, b;
    lm::rope_pair_backward(a, b, to_f(row[head + at.j]), to_f(row[head + at.j + half]), at.cos,
                           at.sin);
    dq[at.n * QD + head + at.j] = from_f<T>(a), dq[at.n * QD + head + at.j + half] = from_f<T>(b);
    if (at.h % rep != 0) continue;
    float ka = 0, kb = 0, va = 0, vb = 0;
    for (int r = 0; r < rep; ++r) {
      const size_t h = head + size_t(r) * D;
      ka += to_f(row[QD + h + at.j]), kb += to_f(row[QD + h + at.j + half]);
      va += to_f(row[2 * QD + h + at.j]), vb += to_f(row[2 * QD + h + at.j + half]);
    }
    const size_t g = at.n * KVD + size_t(at.h / rep) * D;
    lm::rope_pair_backward(a, b, ka, kb, at.cos, at.sin);
    dk[g + at.j] = from_f<T>(a), dk[g + at.j + half] = from_f<T>(b);
    dv[g + at.j] = from_f<T>(va), dv[g + at.j + half] = from_f<T>(vb);
  }
}

template <class T, bool kForward>
__global__ void rope_kernel(T* x, const float* cos, const float* sin, size_t n, int Tn, int H,
                            int D) {
  const int half = D / 2;
  DSX_GRID_STRIDE(i, n) {
    const RopeSite at(i, H, half, Tn, cos, sin);
    T* v = x + at.n * size_t(H) * D + size_t(at.h) * D;
    float a, b;
    if constexpr (kForward) {
      lm::rope_pair_forward(a, b, to_f(v[at.j]), to_f(v[at.j + half]), at.cos, at.sin);
    } else {
      lm::rope_pair_backward(a, b, to_f(v[at.j]), to_f(v[at.j + half]), at.cos, at.sin);
    }
    v[at.j] = from_f<T>(a), v[at.j + half] = from_f<T>(b);
  }
}

template <class T>
__global__ void swiglu_forward_kernel(T* h, const T* gate, const T* up, size_t n) {
  DSX_GRID_STRIDE(i, n) h[i] = from_f<T>(lm::swiglu(to_f(gate[i]), to_f(up[i])));
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dh, const T* gate, const T* up,
                                       size_t n) {
  DSX_GRID_STRIDE(i, n) {
    const float g = to_f(gate[i]), d = to_f(dh[i]), sig = lm::sigmoid(g);
    dup[i] = from_f<T>(lm::swiglu_dup_given(d, g, sig));
    dgate[i] = from_f<T>(lm::swiglu_dgate_given(d, g, to_f(up[i]), sig));
  }
}

}  // namespace

template <class T>
void llama_embedding_forward(T* out, const int32_t* tokens, const T* table, size_t N, int C,
                             cudaStream_t stream) {
  const size_t n = N * C;
  // The table is read at the tokens' rows only, which the launch does not know: not declared.
  DSX_TOUCHES(DSX_WRITES(out, n * sizeof(T)), DSX_READS(tokens, N * 4));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, embedding_forward_kernel)(out, tokens, table, C, n);
  check_launch("llama_embedding_forward");
}

template <class T>
void llama_rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, size_t N, int C,
                           float eps, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(out, N * C * sizeof(T)), DSX_WRITES(rstd, N * 4), DSX_READS(inp, N * C * sizeof(T)),
              DSX_READS(weight, C * sizeof(T)));
  DSX_LAUNCH(warp_blocks(N), kWarpsPerBlock * kWarp, 0, stream, rmsnorm_forward_kernel)(out, rstd, inp,
                                                                                weight, N, C, eps);
  check_launch("llama_rmsnorm_forward");
}

template <class T>
void llama_rmsnorm_backward(T* dinp, T* dweight, float* scratch, const T* dout, const T* inp,
                            const T* weight, const float* rstd, size_t N, int C,
                            cudaStream_t stream) {
  const size_t rows_bytes = N * C * sizeof(T);
  DSX_TOUCHES(DSX_WRITES(dinp, rows_bytes), DSX_READS(dout, rows_bytes), DSX_READS(inp, rows_bytes),
              DSX_READS(weight, C * sizeof(T)), DSX_READS(rstd, N * 4));
  DSX_LAUNCH(warp_blocks(N), kWarpsPerBlock * kWarp, 0, stream, rmsnorm_backward_kernel)(
      dinp, dout, inp, weight, rstd, N, C);
  check_launch("llama_rmsnorm_backward");
  if (!dweight) return;  // a frozen norm (LoRA's base)
  DSX_TOUCHES(DSX_READS(dout, rows_bytes), DSX_READS(inp, rows_bytes), DSX_READS(rstd, N * 4));
  add_column_sums(dweight, RmsNormWeightTerm<T>{dout, inp, rstd, C}, N, C, scratch, stream,
                  "llama_rmsnorm_backward dweight");
}

template <class T>
void llama_qkv_pack_forward(T* qkv, const T* q, const T* k, const T* v, const float* cos,
                            const float* sin, int B, int Tn, int NH, int KV, int D,
                            cudaStream_t stream) {
  const size_t n = size_t(B) * Tn * NH * (D / 2);
  const size_t rows = size_t(B) * Tn, QD = size_t(NH) * D, KVD = size_t(KV) * D, table = size_t(Tn) * (D / 2) * 4;
  DSX_TOUCHES(DSX_WRITES(qkv, rows * 3 * QD * sizeof(T)), DSX_READS(q, rows * QD * sizeof(T)),
              DSX_READS(k, rows * KVD * sizeof(T)), DSX_READS(v, rows * KVD * sizeof(T)), DSX_READS(cos, table),
              DSX_READS(sin, table));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, qkv_pack_forward_kernel)(qkv, q, k, v, cos, sin, n, Tn, NH, KV,
                                                              D);
  check_launch("llama_qkv_pack_forward");
}

template <class T>
void llama_qkv_pack_backward(T* dq, T* dk, T* dv, const T* dqkv, const float* cos, const float* sin,
                             int B, int Tn, int NH, int KV, int D, cudaStream_t stream) {
  const size_t n = size_t(B) * Tn * NH * (D / 2);
  const size_t rows = size_t(B) * Tn, QD = size_t(NH) * D, KVD = size_t(KV) * D, table = size_t(Tn) * (D / 2) * 4;
  DSX_TOUCHES(DSX_WRITES(dq, rows * QD * sizeof(T)), DSX_WRITES(dk, rows * KVD * sizeof(T)),
              DSX_WRITES(dv, rows * KVD * sizeof(T)), DSX_READS(dqkv, rows * 3 * QD * sizeof(T)),
              DSX_READS(cos, table), DSX_READS(sin, table));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, qkv_pack_backward_kernel)(dq, dk, dv, dqkv, cos, sin, n, Tn,
                                                               NH, KV, D);
  check_launch("llama_qkv_pack_backward");
}

template <class T>
void llama_rope_forward(T* x, const float* cos, const float* sin, int B, int Tn, int H, int D,
                        cudaStream_t stream) {
  const size_t n = size_t(B) * Tn * H * (D / 2);
  DSX_TOUCHES(DSX_WRITES(x, 2 * n * sizeof(T)), DSX_READS(cos, size_t(Tn) * (D / 2) * 4),
              DSX_READS(sin, size_t(Tn) * (D / 2) * 4));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, rope_kernel<T, true>)(x, cos, sin, n, Tn, H, D);
  check_launch("llama_rope_forward");
}

template <class T>
void llama_rope_backward(T* dx, const float* cos, const float* sin, int B, int Tn, int H, int D,
                         cudaStream_t stream) {
  const size_t n = size_t(B) * Tn * H * (D / 2);
  DSX_TOUCHES(DSX_WRITES(dx, 2 * n * sizeof(T)), DSX_READS(cos, size_t(Tn) * (D / 2) * 4),
              DSX_READS(sin, size_t(Tn) * (D / 2) * 4));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, rope_kernel<T, false>)(dx, cos, sin, n, Tn, H, D);
  check_launch("llama_rope_backward");
}

template <class T>
void llama_swiglu_forward(T* h, const T* gate, const T* up, size_t n, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(h, n * sizeof(T)), DSX_READS(gate, n * sizeof(T)), DSX_READS(up, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, swiglu_forward_kernel)(h, gate, up, n);
  check_launch("llama_swiglu_forward");
}

template <class T>
void llama_swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, size_t n,
                           cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(dgate, n * sizeof(T)), DSX_WRITES(dup, n * sizeof(T)), DSX_READS(dh, n * sizeof(T)),
              DSX_READS(gate, n * sizeof(T)), DSX_READS(up, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, swiglu_backward_kernel)(dgate, dup, dh, gate, up, n);
  check_launch("llama_swiglu_backward");
}

#define DSX_LLAMA_CUDA_INSTANTIATE(T)                                                              \
  template void llama_embedding_forward<T>(T*, const int32_t*, const T*, size_t, int,              \
                                           cudaStream_t);                                          \
  template void llama_rmsnorm_forward<T>(T*, float*, const T*, const T*, size_t, int, float,       \
                                         cudaStream_t);                                            \
  template void llama_rmsnorm_backward<T>(T*, T*, float*, const T*, const T*, const T*,            \
                                          const float*, size_t, int, cudaStream_t);                \
  template void llama_qkv_pack_forward<T>(T*, const T*, const T*, const T*, const float*,          \
                                          const float*, int, int, int, int, int, cudaStream_t);    \
  template void llama_qkv_pack_backward<T>(T*, T*, T*, const T*, const float*, const float*, int,  \
                                           int, int, int, int, cudaStream_t);                      \
  template void llama_rope_forward<T>(T*, const float*, const float*, int, int, int, int,          \
                                      cudaStream_t);                                               \
  template void llama_rope_backward<T>(T*, const float*, const float*, int, int, int, int,         \
                                       cudaStream_t);                                              \
  template void llama_swiglu_forward<T>(T*, const T*, const T*, size_t, cudaStream_t);             \
  template void llama_swiglu_backward<T>(T*, T*, const T*, const T*, const T*, size_t,             \
                                         cudaStream_t);

DSX_LLAMA_CUDA_INSTANTIATE(float)
DSX_LLAMA_CUDA_INSTANTIATE(__nv_bfloat16)
DSX_LLAMA_CUDA_INSTANTIATE(__half)
#undef DSX_LLAMA_CUDA_INSTANTIATE
#undef DSX_GRID_STRIDE

}  // namespace dsx::kernels::cuda
