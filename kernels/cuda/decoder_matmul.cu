// The decoder layers' matmuls through cuBLASLt (see decoder_layers.h). Row-major (N, C) activations and (OC, C)
// weights are column-major (C, N) and (C, OC) to cuBLAS, so out^T = W^T-op x inp^T needs no copy.
// fp32 compute for both storage types (no TF32: the GPU tests compare with the CPU at 1e-4).
// Each distinct matmul is planned once (kernels/matmul_plan_cache.h); every cuBLASLt object has
// an owner, so a failed check in the middle of planning frees what was made.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/decoder_layers.h"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/matmul_plan_cache.h"

namespace dsx::kernels::cuda {

namespace {

// cuBLASLt's part of the workspace; the bias gradient's scratch follows it.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kWorkspaceAlignment = 256;  // what cuBLASLt assumes of its workspace

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::Internal, std::string("cuBLASLt ") + what + " failed with status " + std::to_string(int(s)) +
                                         "; check the CUDA/cuBLAS installation and that a GPU is visible");
}

// Owners of the cuBLASLt objects.
struct LtDelete {
  void operator()(cublasLtContext* h) const { cublasLtDestroy(h); }
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
template <class H>
using LtOwned = std::unique_ptr<std::remove_pointer_t<H>, LtDelete>;

struct MatmulPlan {
  LtOwned<cublasLtMatmulDesc_t> op;
  LtOwned<cublasLtMatrixLayout_t> a, b, d;
  cublasLtMatmulAlgo_t algo{};
};

template <class T>
cudaDataType_t data_type();
template <>
cudaDataType_t data_type<float>() { return CUDA_R_32F; }
template <>
cudaDataType_t data_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <>
cudaDataType_t data_type<__half>() { return CUDA_R_16F; }

uint32_t alignment_of(const void* p) {
  uint32_t align = 256;
  while (align > 1 && reinterpret_cast<uintptr_t>(p) % align != 0) align /= 2;
  return align;
}

LtOwned<cublasLtMatrixLayout_t> layout(cudaDataType_t type, int rows, int cols, int ld, const char* what) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), what);
  return LtOwned<cublasLtMatrixLayout_t>(l);
}

}  // namespace

struct DecoderBlas::State {
  LtOwned<cublasLtHandle_t> handle;
  void* workspace = nullptr;  // cuBLASLt's kWorkspaceBytes, the owner's memory
  MatmulPlanCache<MatmulPlan> plans;
  float* bias_scratch = nullptr;  // fp32 chunk sums of the bias gradient, after cuBLASLt's part
  size_t bias_scratch_floats = 0;

  std::unique_ptr<MatmulPlan> plan(const MatmulShape& s) const {
    auto p = std::make_unique<MatmulPlan>();
    cublasLtMatmulDesc_t op = nullptr;
    check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    p->op.reset(op);
    cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
    const auto epilogue = static_cast<cublasLtEpilogue_t>(s.epilogue);
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "epilogue");
    const auto type = static_cast<cudaDataType_t>(s.dtype);
    p->a = layout(type, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, "layout A");
    p->b = layout(type, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, "layout B");
    p->d = layout(type, s.m, s.n, s.ldd, "layout D");
    cublasLtMatmulPreference_t raw_pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&raw_pref), "preference");
    LtOwned<cublasLtMatmulPreference_t> pref(raw_pref);
    size_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
          "workspace preference");
    // Parameters are slices of one flat buffer: tell cuBLASLt how aligned each pointer really is
    // (it assumes 256 bytes otherwise and may pick a kernel that cannot run on a slice).
    const uint32_t aligns[4] = {s.align_a, s.align_b, s.align_d, s.align_d};
    const cublasLtMatmulPreferenceAttributes_t keys[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      check(cublasLtMatmulPreferenceSetAttribute(raw_pref, keys[i], &aligns[i], sizeof(aligns[i])),
            "alignment preference");
    }
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(handle.get(), op, p->a.get(), p->b.get(), p->d.get(), p->d.get(), raw_pref, 1,
                                         &heuristic, &found),
          "heuristic");
    if (found == 0)
      throw Error(ErrorKind::Unsupported, "cuBLASLt has no algorithm for the decoder matmul " + std::to_string(s.m) + "x" +
                                              std::to_string(s.n) + "x" + std::to_string(s.k));
    p->algo = heuristic.algo;
    return p;
  }

  // The scratch for a bias gradient of N rows and OC columns: the workspace's tail, sized by the
  // owner for the widest biased output.
  float* bias_sums(size_t N, size_t OC) {
    const size_t floats = column_sums_scratch_floats(N, OC);
    if (floats > bias_scratch_floats)
      throw Error(ErrorKind::Internal,
                  "decoder_bias_backward: a bias gradient of " + std::to_string(OC) + " columns needs " +
                      std::to_string(floats * sizeof(float)) + " bytes of scratch, but the DecoderBlas workspace "
                      "leaves " + std::to_string(bias_scratch_floats * sizeof(float)) +
                      "; size it with DecoderBlas::workspace_bytes(the widest biased output)");
    return bias_scratch;
  }
};

size_t DecoderBlas::workspace_bytes(size_t max_bias_columns) {
  // Any N is cut into at most kMaxRowChunks chunks (kernels/column_sums.h).
  return kWorkspaceBytes + size_t(kMaxRowChunks) * max_bias_columns * sizeof(float);
}

DecoderBlas::DecoderBlas(Workspace workspace) : state_(std::make_unique<State>()) {
  if (workspace.bytes < kWorkspaceBytes || reinterpret_cast<uintptr_t>(workspace.data) % kWorkspaceAlignment != 0)
    throw Error(ErrorKind::Internal, "DecoderBlas: the workspace (" + std::to_string(workspace.bytes) +
                                         " bytes) must hold at least workspace_bytes(0) = " +
                                         std::to_string(kWorkspaceBytes) + " bytes, 256-byte aligned");
  cublasLtHandle_t handle = nullptr;
  check(cublasLtCreate(&handle), "create");
  state_->handle.reset(handle);
  state_->workspace = workspace.data;
  state_->bias_scratch = reinterpret_cast<float*>(static_cast<char*>(workspace.data) + kWorkspaceBytes);
  state_->bias_scratch_floats = (workspace.bytes - kWorkspaceBytes) / sizeof(float);
}

DecoderBlas::~DecoderBlas() = default;
DecoderBlas::DecoderBlas(DecoderBlas&&) noexcept = default;
DecoderBlas& DecoderBlas::operator=(DecoderBlas&&) noexcept = default;

size_t DecoderBlas::plans_built() const { return state_ ? state_->plans.builds() : 0; }

namespace {

// D (m x n, col-major, ld ldd) = op(A) op(B) + beta D [+ bias over rows].
template <class T>
void lt_matmul(DecoderBlas& blas, T* d, const T* a, const T* b, const T* bias, int m, int n, int k, bool trans_a,
               bool trans_b, int lda, int ldb, int ldd, float beta, cudaStream_t stream, float alpha = 1.0f) {
  DecoderBlas::State& st = blas.state();
  MatmulShape shape;
  shape.m = m, shape.n = n, shape.k = k, shape.lda = lda, shape.ldb = ldb, shape.ldd = ldd;
  shape.trans_a = trans_a, shape.trans_b = trans_b, shape.dtype = data_type<T>();
  shape.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  shape.align_a = alignment_of(a), shape.align_b = alignment_of(b), shape.align_d = alignment_of(d);
  MatmulPlan& plan = st.plans.get(shape, [&] { return st.plan(shape); });
  if (bias) {  // the plan is shared by every layer of this shape; the bias pointer is per call
    check(cublasLtMatmulDescSetAttribute(plan.op.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
          "bias");
  }
  check(cublasLtMatmul(st.handle.get(), plan.op.get(), &alpha, a, plan.a.get(), b, plan.b.get(), &beta, d,
                       plan.d.get(), d, plan.d.get(), &plan.algo, st.workspace, kWorkspaceBytes, stream),
        "matmul");
}

}  // namespace

template <class T>
void decoder_matmul_forward(DecoderBlas& blas, T* out, const T* inp, const T* weight, const T* bias, size_t N, int C,
                         int OC, cudaStream_t stream) {
  lt_matmul(blas, out, weight, inp, bias, OC, static_cast<int>(N), C, true, false, C, C, OC, 0.0f, stream);
}

template <class T>
void decoder_matmul_backward(DecoderBlas& blas, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, size_t N, int C, int OC, cudaStream_t stream) {
  const T* no_bias = nullptr;
  lt_matmul(blas, dinp, weight, dout, no_bias, C, static_cast<int>(N), OC, false, false, C, OC, C, 0.0f, stream);
  if (dweight)  // null: a frozen weight (LoRA's base) takes no gradient
    lt_matmul(blas, dweight, inp, dout, no_bias, C, OC, static_cast<int>(N), false, true, C, OC, C, 1.0f, stream);
  if (dbias) decoder_bias_backward(blas, dbias, dout, N, OC, stream);
}

// Row-major C = alpha op(A) op(B) + beta C is, column-major, C^T = alpha op(B)^T op(A)^T + beta C^T.
template <class T>
void decoder_gemm(DecoderBlas& blas, bool trans_a, bool trans_b, size_t M, int N, int K, float alpha, const T* A,
                  int lda, const T* B, int ldb, float beta, T* C, int ldc, cudaStream_t stream) {
  const T* no_bias = nullptr;
  lt_matmul(blas, C, B, A, no_bias, N, static_cast<int>(M), K, trans_b, trans_a, ldb, lda, ldc, beta, stream, alpha);
}

template <class T>
void decoder_bias_backward(DecoderBlas& blas, T* dbias, const T* dout, size_t N, int OC, cudaStream_t stream) {
  float* scratch = blas.state().bias_sums(N, size_t(OC));
  DSX_TOUCHES(DSX_READS(dout, N * OC * sizeof(T)));
  add_column_sums(dbias, MatrixEntry<T>{dout, OC}, N, OC, scratch, stream, "decoder_bias_backward");
}

#define DSX_DECODER_MATMUL_INSTANTIATE(T)                                                                          \
  template void decoder_matmul_forward<T>(DecoderBlas&, T*, const T*, const T*, const T*, size_t, int, int,          \
                                       cudaStream_t);                                                           \
  template void decoder_matmul_backward<T>(DecoderBlas&, T*, T*, T*, const T*, const T*, const T*, size_t, int, int, \
                                        cudaStream_t);                                                           \
  template void decoder_bias_backward<T>(DecoderBlas&, T*, const T*, size_t, int, cudaStream_t);                   \
  template void decoder_gemm<T>(DecoderBlas&, bool, bool, size_t, int, int, float, const T*, int, const T*, int,     \
                                float, T*, int, cudaStream_t);

DSX_DECODER_MATMUL_INSTANTIATE(float)
DSX_DECODER_MATMUL_INSTANTIATE(__nv_bfloat16)
DSX_DECODER_MATMUL_INSTANTIATE(__half)

}  // namespace dsx::kernels::cuda
