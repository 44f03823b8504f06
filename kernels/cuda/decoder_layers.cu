// The decoder layer kernels on the GPU (see decoder_layers.h); matmuls are in decoder_matmul.cu.
#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/cuda/batch_tokens.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/decoder_layers.h"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/token_rows_sum.cuh"
#include "kernels/cuda/warp_rows.cuh"
#include "kernels/decoder_math.h"

namespace dsx::kernels::cuda {

namespace {

__device__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v, dsx_shared_ptr<float> shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}
__device__ float block_max(float v, dsx_shared_ptr<float> shared) {
  v = warp_max(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -FLT_MAX;
  return warp_max(v);
}

template <class T>
__global__ void encoder_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int Tn, int C,
                                       size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    size_t row = i / C;
    int c = static_cast<int>(i % C), t = static_cast<int>(row % Tn);
    out[i] = from_f<T>(to_f(wte[size_t(tokens[row]) * C + c]) + to_f(wpe[size_t(t) * C + c]));
  }
}

// dwpe[t, c] += sum over b of dout[b, t, c], b in order: one thread per (t, c).
template <class T>
__global__ void wpe_backward_kernel(T* dwpe, const T* dout, int B, int Tn, int C) {
  const size_t n = size_t(Tn) * C;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int b = 0; b < B; ++b) s += to_f(dout[size_t(b) * n + i]);
    dwpe[i] = from_f<T>(to_f(dwpe[i]) + s);
  }
}

// One warp per row.
template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, size_t N, int C) {
  size_t row = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  float s = 0;
  for (int i = lane; i < C; i += kWarp) s += to_f(x[i]);
  float m = decoder::layernorm_mean(warp_sum(s), C);
  float v = 0;
  for (int i = lane; i < C; i += kWarp) v += (to_f(x[i]) - m) * (to_f(x[i]) - m);
  float r = decoder::layernorm_rstd(warp_sum(v), C);
  for (int i = lane; i < C; i += kWarp)
    out[row * C + i] =
        from_f<T>(decoder::layernorm_affine(decoder::layernorm_xhat(to_f(x[i]), m, r), to_f(weight[i]), to_f(bias[i])));
  if (lane == 0) mean[row] = m, rstd[row] = r;
}

// dinp only, one warp per row; the parameter gradients are column sums (LayerNormWeightTerm).
template <class T>
__global__ void layernorm_backward_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                          const float* rstd, size_t N, int C) {
  size_t row = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* g = dout + row * C;
  float m = mean[row], r = rstd[row];
  float g_mean = 0, g_xhat_mean = 0;
  for (int i = lane; i < C; i += kWarp) {
    float xhat = decoder::layernorm_xhat(to_f(x[i]), m, r), gx = decoder::layernorm_dnorm(to_f(g[i]), to_f(weight[i]));
    g_mean += gx;
    g_xhat_mean += gx * xhat;
  }
  g_mean = decoder::layernorm_mean(warp_sum(g_mean), C);
  g_xhat_mean = decoder::layernorm_mean(warp_sum(g_xhat_mean), C);
  for (int i = lane; i < C; i += kWarp) {
    float xhat = decoder::layernorm_xhat(to_f(x[i]), m, r);
    float d = decoder::layernorm_dinp_given(decoder::layernorm_dnorm(to_f(g[i]), to_f(weight[i])), xhat, g_mean,
                                         g_xhat_mean, r);
    dinp[row * C + i] = from_f<T>(to_f(dinp[row * C + i]) + d);
  }
}

// The weight gradient's term: dout * x_hat.
template <class T>
struct LayerNormWeightTerm {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int C;
  __device__ float operator()(size_t r, int c) const {
    return to_f(dout[r * C + c]) * decoder::layernorm_xhat(to_f(inp[r * C + c]), mean[r], rstd[r]);
  }
};

// One warp per (b, h, query t): scores in att's row, softmax, then the weighted sum of values.
template <class T>
__global__ void attention_forward_kernel(T* out, float* att, const T* qkv, int B, int Tn, int C, int NH) {
  size_t w = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (w >= size_t(B) * NH * Tn) return;
  const int t = static_cast<int>(w % Tn), h = static_cast<int>((w / Tn) % NH), b = static_cast<int>(w / Tn / NH);
  const int hs = C / NH;
  const size_t C3 = 3 * size_t(C);
  const float scale = decoder::attention_scale<float>(hs);
  const T* q = qkv + (size_t(b) * Tn + t) * C3 + h * hs;
  float* a = att + w * Tn;
  float maxv = -FLT_MAX;
  for (int t2 = lane; t2 <= t; t2 += kWarp) {
    const T* k = qkv + (size_t(b) * Tn + t2) * C3 + C + h * hs;
    float dot = 0;
    for (int i = 0; i < hs; ++i) dot += to_f(q[i]) * to_f(k[i]);
    a[t2] = dot * scale;
    maxv = fmaxf(maxv, a[t2]);
  }
  maxv = warp_max(maxv);
  float sum = 0;
  for (int t2 = lane; t2 <= t; t2 += kWarp) {
    a[t2] = expf(a[t2] - maxv);
    sum += a[t2];
  }
  float inv = decoder::softmax_inv_sum(warp_sum(sum));
  for (int t2 = lane; t2 <= t; t2 += kWarp) a[t2] *= inv;
  __syncwarp();
  for (int i = lane; i < hs; i += kWarp) {
    float o = 0;
    for (int t2 = 0; t2 <= t; ++t2) o += a[t2] * to_f(qkv[(size_t(b) * Tn + t2) * C3 + 2 * C + h * hs + i]);
    out[(size_t(b) * Tn + t) * C + h * hs + i] = from_f<T>(o);
  }
}

// Backward, step 1, one warp per query row: dpre = a * (datt - sum(a * datt)) * scale, and dq.
template <class T>
__global__ void attention_backward_query_kernel(T* dqkv, float* dpre, const T* dout, const T* qkv, const float* att,
                                                int B, int Tn, int C, int NH) {
  size_t w = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (w >= size_t(B) * NH * Tn) return;
  const int t = static_cast<int>(w % Tn), h = static_cast<int>((w / Tn) % NH), b = static_cast<int>(w / Tn / NH);
  const int hs = C / NH;
  const size_t C3 = 3 * size_t(C);
  const float scale = decoder::attention_scale<float>(hs);
  const T* g = dout + (size_t(b) * Tn + t) * C + h * hs;
  const float* a = att + w * Tn;
  float* dp = dpre + w * Tn;
  float rowdot = 0;
  for (int t2 = lane; t2 <= t; t2 += kWarp) {
    const T* v = qkv + (size_t(b) * Tn + t2) * C3 + 2 * C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += to_f(g[i]) * to_f(v[i]);
    dp[t2] = d;
    rowdot += d * a[t2];
  }
  rowdot = warp_sum(rowdot);
  for (int t2 = lane; t2 <= t; t2 += kWarp) dp[t2] = decoder::softmax_backward_given(a[t2], dp[t2], rowdot) * scale;
  __syncwarp();
  for (int i = lane; i < hs; i += kWarp) {
    float dq = 0;
    for (int t2 = 0; t2 <= t; ++t2) dq += dp[t2] * to_f(qkv[(size_t(b) * Tn + t2) * C3 + C + h * hs + i]);
    dqkv[(size_t(b) * Tn + t) * C3 + h * hs + i] = from_f<T>(dq);
  }
}

// Backward, step 2, one warp per key row t2: dk and dv sum over the queries t >= t2 (no atomics).
template <class T>
__global__ void attention_backward_key_kernel(T* dqkv, const float* dpre, const T* dout, const T* qkv,
                                              const float* att, int B, int Tn, int C, int NH) {
  size_t w = blockIdx.x * size_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (w >= size_t(B) * NH * Tn) return;
  const int t2 = static_cast<int>(w % Tn), h = static_cast<int>((w / Tn) % NH), b = static_cast<int>(w / Tn / NH);
  const int hs = C / NH;
  const size_t C3 = 3 * size_t(C);
  const size_t head = (size_t(b) * NH + h) * Tn;  // first row of this (b, h) in att and dpre
  for (int i = lane; i < hs; i += kWarp) {
    float dk = 0, dv = 0;
    for (int t = t2; t < Tn; ++t) {
      dk += dpre[(head + t) * Tn + t2] * to_f(qkv[(size_t(b) * Tn + t) * C3 + h * hs + i]);
      dv += att[(head + t) * Tn + t2] * to_f(dout[(size_t(b) * Tn + t) * C + h * hs + i]);
    }
    dqkv[(size_t(b) * Tn + t2) * C3 + C + h * hs + i] = from_f<T>(dk);
    dqkv[(size_t(b) * Tn + t2) * C3 + 2 * C + h * hs + i] = from_f<T>(dv);
  }
}

template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(decoder::gelu_tanh(to_f(inp[i])));
}

template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dinp[i] = from_f<T>(decoder::gelu_tanh_grad(to_f(inp[i])) * to_f(dout[i]));
}

template <class T>
__global__ void residual_forward_kernel(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

// One block per row.
template <class T>
__global__ void crossentropy_forward_kernel(float* losses, float* lse, const T* logits, const int32_t* targets,
                                            int V, int Vp) {
  DSX_SHARED(float, shared, kWarp);
  const T* z = logits + size_t(blockIdx.x) * Vp;
  float m = -FLT_MAX;
  for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, to_f(z[i]));
  m = block_max(m, shared);
  float s = 0;
  for (int i = threadIdx.x; i < V; i += blockDim.x) s += expf(to_f(z[i]) - m);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) {
    float l = decoder::logsumexp_given(m, s);
    int32_t y = targets[blockIdx.x];
    lse[blockIdx.x] = l;
    losses[blockIdx.x] = decoder::crossentropy_loss(l, y, [&] { return to_f(z[y]); });
  }
}

template <class T>
__global__ void crossentropy_backward_kernel(T* z_to_dz, const float* lse, const int32_t* targets, float dloss,
                                             const int32_t* counted, int V, int Vp) {
  // With the count on the device, dloss is the scale the mean's gradient is divided from.
  if (counted) dloss = *counted ? dloss / static_cast<float>(*counted) : 0.0f;
  T* z = z_to_dz + size_t(blockIdx.x) * Vp;
  int32_t y = targets[blockIdx.x];
  float l = lse[blockIdx.x];
  for (int i = threadIdx.x; i < Vp; i += blockDim.x) {
    float d = 0.0f;
    if (decoder::crossentropy_counted(y) && i < V)
      d = decoder::crossentropy_dlogit_given(expf(to_f(z[i]) - l) * dloss, i == y, dloss);
    z[i] = from_f<T>(d);
  }
}

}  // namespace

template <class T>
void decoder_positional_embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                          cudaStream_t stream) {
  size_t n = size_t(B) * Tn * C;
  // The tables are read at the tokens' rows only, which the launch does not know: not declared.
  DSX_TOUCHES(DSX_WRITES(out, n * sizeof(T)), DSX_READS(tokens, size_t(B) * Tn * 4),
              DSX_READS(wpe, size_t(Tn) * C * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, encoder_forward_kernel)(out, tokens, wte, wpe, Tn, C, n);
  check_launch("decoder_positional_embedding_forward");
}

template <class T>
void decoder_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                            size_t N, int C, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(out, N * C * sizeof(T)), DSX_WRITES(mean, N * 4), DSX_WRITES(rstd, N * 4),
              DSX_READS(inp, N * C * sizeof(T)), DSX_READS(weight, C * sizeof(T)), DSX_READS(bias, C * sizeof(T)));
  DSX_LAUNCH(warp_blocks(N), kWarpsPerBlock * kWarp, 0, stream, layernorm_forward_kernel)(out, mean, rstd, inp, weight,
                                                                                   bias, N, C);
  check_launch("decoder_layernorm_forward");
}

template <class T>
void decoder_layernorm_backward(T* dinp, T* dweight, T* dbias, float* scratch, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, size_t N, int C,
                             cudaStream_t stream) {
  const size_t rows_bytes = N * C * sizeof(T);
  DSX_TOUCHES(DSX_WRITES(dinp, rows_bytes), DSX_READS(dout, rows_bytes), DSX_READS(inp, rows_bytes),
              DSX_READS(weight, C * sizeof(T)), DSX_READS(mean, N * 4), DSX_READS(rstd, N * 4));
  DSX_LAUNCH(warp_blocks(N), kWarpsPerBlock * kWarp, 0, stream, layernorm_backward_kernel)(dinp, dout, inp, weight, mean,
                                                                                    rstd, N, C);
  check_launch("decoder_layernorm_backward");
  if (!dweight || !dbias) return;  // a frozen norm (LoRA's base)
  // The scratch is reused: stream order puts the second sum after the first has read it.
  DSX_TOUCHES(DSX_READS(dout, rows_bytes), DSX_READS(inp, rows_bytes), DSX_READS(mean, N * 4),
              DSX_READS(rstd, N * 4));
  add_column_sums(dweight, LayerNormWeightTerm<T>{dout, inp, mean, rstd, C}, N, C, scratch, stream,
                  "decoder_layernorm_backward dweight");
  DSX_TOUCHES(DSX_READS(dout, rows_bytes));
  add_column_sums(dbias, MatrixEntry<T>{dout, C}, N, C, scratch, stream, "decoder_layernorm_backward dbias");
}

template <class T>
void decoder_attention_forward(T* out, float* att, const T* qkv, int B, int Tn, int C, int NH, cudaStream_t stream) {
  size_t rows = size_t(B) * NH * Tn;
  DSX_TOUCHES(DSX_WRITES(out, size_t(B) * Tn * C * sizeof(T)), DSX_WRITES(att, rows * Tn * 4),
              DSX_READS(qkv, size_t(B) * Tn * 3 * C * sizeof(T)));
  DSX_LAUNCH(warp_blocks(rows), kWarpsPerBlock * kWarp, 0, stream, attention_forward_kernel)(out, att, qkv, B, Tn, C, NH);
  check_launch("decoder_attention_forward");
}

template <class T>
void decoder_attention_backward(T* dqkv, float* dpre, const T* dout, const T* qkv, const float* att, int B, int Tn,
                             int C, int NH, cudaStream_t stream) {
  size_t rows = size_t(B) * NH * Tn;
  const auto touches = [&] {
    DSX_TOUCHES(DSX_WRITES(dqkv, size_t(B) * Tn * 3 * C * sizeof(T)), DSX_WRITES(dpre, rows * Tn * 4),
                DSX_READS(dout, size_t(B) * Tn * C * sizeof(T)), DSX_READS(qkv, size_t(B) * Tn * 3 * C * sizeof(T)),
                DSX_READS(att, rows * Tn * 4));
  };
  touches();
  DSX_LAUNCH(warp_blocks(rows), kWarpsPerBlock * kWarp, 0, stream, attention_backward_query_kernel)(dqkv, dpre, dout, qkv,
                                                                                             att, B, Tn, C, NH);
  touches();
  DSX_LAUNCH(warp_blocks(rows), kWarpsPerBlock * kWarp, 0, stream, attention_backward_key_kernel)(dqkv, dpre, dout, qkv, att,
                                                                                           B, Tn, C, NH);
  check_launch("decoder_attention_backward");
}

template <class T>
void decoder_gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(out, n * sizeof(T)), DSX_READS(inp, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, gelu_forward_kernel)(out, inp, n);
  check_launch("decoder_gelu_forward");
}

template <class T>
void decoder_gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(dinp, n * sizeof(T)), DSX_READS(inp, n * sizeof(T)), DSX_READS(dout, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, gelu_backward_kernel)(dinp, inp, dout, n);
  check_launch("decoder_gelu_backward");
}

template <class T>
void decoder_residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(out, n * sizeof(T)), DSX_READS(a, n * sizeof(T)), DSX_READS(b, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, residual_forward_kernel)(out, a, b, n);
  check_launch("decoder_residual_forward");
}

template <class T>
void decoder_crossentropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets, size_t N, int V,
                               int Vp, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(losses, N * 4), DSX_WRITES(lse, N * 4), DSX_READS(logits, N * Vp * sizeof(T)),
              DSX_READS(targets, N * 4));
  DSX_LAUNCH(static_cast<unsigned>(N), 512, 0, stream, crossentropy_forward_kernel)(losses, lse, logits, targets, V, Vp);
  check_launch("decoder_crossentropy_forward");
}

template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const float* lse, const int32_t* targets, float dloss,
                                size_t N, int V, int Vp, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(logits_to_dlogits, N * Vp * sizeof(T)), DSX_READS(lse, N * 4), DSX_READS(targets, N * 4));
  DSX_LAUNCH(static_cast<unsigned>(N), 512, 0, stream, crossentropy_backward_kernel)(logits_to_dlogits, lse, targets, dloss,
                                                                              nullptr, V, Vp);
  check_launch("decoder_crossentropy_backward");
}

template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const float* lse, const int32_t* targets, float grad_scale,
                                const int32_t* counted, size_t N, int V, int Vp, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(logits_to_dlogits, N * Vp * sizeof(T)), DSX_READS(lse, N * 4), DSX_READS(targets, N * 4),
              DSX_READS(counted, 4));
  DSX_LAUNCH(static_cast<unsigned>(N), 512, 0, stream, crossentropy_backward_kernel)(logits_to_dlogits, lse, targets,
                                                                              grad_scale, counted, V, Vp);
  check_launch("decoder_crossentropy_backward");
}

template <class T>
void decoder_positional_embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* grouped, int B, int Tn, int C,
                                           cudaStream_t stream) {
  const size_t N = size_t(B) * Tn;
  DSX_TOUCHES(DSX_READS(grouped, grouped_rows_capacity(N) * 4));
  add_grouped_rows(dwte, dout, grouped, N, C, stream);
  DSX_TOUCHES(DSX_WRITES(dwpe, size_t(Tn) * C * sizeof(T)), DSX_READS(dout, N * C * sizeof(T)));
  DSX_LAUNCH(grid_for(size_t(Tn) * C), kBlock, 0, stream, wpe_backward_kernel)(dwpe, dout, B, Tn, C);
  check_launch("decoder_positional_embedding_backward");
}

#define DSX_DECODER_CUDA_INSTANTIATE(T)                                                                              \
  template void decoder_positional_embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int, cudaStream_t);     \
  template void decoder_layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, size_t, int,          \
                                          cudaStream_t);                                                          \
  template void decoder_layernorm_backward<T>(T*, T*, T*, float*, const T*, const T*, const T*, const float*,        \
                                           const float*, size_t, int, cudaStream_t);                              \
  template void decoder_attention_forward<T>(T*, float*, const T*, int, int, int, int, cudaStream_t);                \
  template void decoder_attention_backward<T>(T*, float*, const T*, const T*, const float*, int, int, int, int,      \
                                           cudaStream_t);                                                         \
  template void decoder_gelu_forward<T>(T*, const T*, size_t, cudaStream_t);                                         \
  template void decoder_gelu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);                              \
  template void decoder_residual_forward<T>(T*, const T*, const T*, size_t, cudaStream_t);                           \
  template void decoder_crossentropy_forward<T>(float*, float*, const T*, const int32_t*, size_t, int, int,          \
                                             cudaStream_t);                                                       \
  template void decoder_crossentropy_backward<T>(T*, const float*, const int32_t*, float, size_t, int, int,          \
                                              cudaStream_t);                                                       \
  template void decoder_crossentropy_backward<T>(T*, const float*, const int32_t*, float, const int32_t*, size_t,   \
                                              int, int, cudaStream_t);                                            \
  template void decoder_positional_embedding_backward<T>(T*, T*, const T*, const int32_t*, int, int, int, cudaStream_t);

DSX_DECODER_CUDA_INSTANTIATE(float)
DSX_DECODER_CUDA_INSTANTIATE(__nv_bfloat16)
DSX_DECODER_CUDA_INSTANTIATE(__half)

}  // namespace dsx::kernels::cuda
