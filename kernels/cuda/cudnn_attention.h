// Causal scaled-dot-product attention through cuDNN's fused attention (flash-attention graphs
// built with cudnn-frontend), forward and backward, for 16-bit models with grouped-query
// attention. q and out are (B, T, NH, D), k and v (B, T, KV, D), row-major and contiguous: the
// layout the q/k/v projections write, so no transpose is needed. stats is fp32 (B, NH, T): the
// softmax's log-sum-exp per row, which forward writes and backward reads instead of the T x T
// probabilities dsx's own kernel keeps. Arithmetic inside cuDNN is fp32.
//
// supported() says whether this GPU, cuDNN and shape have a fused engine; when it says no (an
// older GPU, fp32, a head size cuDNN does not take), the caller uses its own kernels. Graphs are
// built once per shape and cached. A graph's workspace comes from the owner's `grow`
// (kernels/cuda/workspace.h), asked when a new shape needs more than it has: the owner allocates
// through device/ and frees the old one after the work already enqueued on the stream. Errors are
// dsx::Error naming the cuDNN call. C++17; device pointers; one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "kernels/cuda/workspace.h"
#include "kernels/dtype.h"

namespace dsx::kernels::cuda {

struct AttentionShape {
  int B = 0, T = 0;
  int NH = 0, KV = 0;  // query heads and key/value heads (KV divides NH)
  int D = 0;           // head size
  float scale = 0;     // applied to q.k, usually 1/sqrt(D)
  DType dtype = DType::BF16;  // BF16 or F16
  bool operator==(const AttentionShape&) const = default;
};

class CudnnAttention {
 public:
  // `stream`: where every call enqueues; `grow`: the owner's workspace, asked for more when a
  // shape's graphs need it (in supported(), forward or backward, before anything is enqueued).
  CudnnAttention(cudaStream_t stream, WorkspaceGrow grow);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  bool supported(const AttentionShape& shape);

  void forward(const AttentionShape& shape, const void* q, const void* k, const void* v, void* out, float* stats);
  // dq, dk, dv are overwritten (not accumulated).
  void backward(const AttentionShape& shape, const void* q, const void* k, const void* v, const void* out,
                const void* dout, const float* stats, void* dq, void* dk, void* dv);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsx::kernels::cuda
