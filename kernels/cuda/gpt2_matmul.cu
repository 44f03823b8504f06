// GPT-2 matmuls through cuBLASLt (see gpt2_layers.h). Row-major (N, C) activations and (OC, C)
// weights are column-major (C, N) and (C, OC) to cuBLAS, so out^T = W^T-op x inp^T needs no copy.
// fp32 compute for both storage types (no TF32: the GPU tests compare with the CPU at 1e-4).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "dsx/error.h"
#include "kernels/cuda/gpt2_layers.h"
#include "kernels/cuda/gpt2_types.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsx::kernels::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::Internal, std::string("cuBLASLt ") + what + " failed with status " + std::to_string(int(s)) +
                                         "; check the CUDA/cuBLAS installation and that a GPU is visible");
}

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

// D (m x n, col-major, ld ldd) = op(A) op(B) + beta D [+ bias over rows].
template <class T>
void lt_matmul(const GPT2Blas& blas, T* d, const T* a, const T* b, const T* bias, int m, int n, int k, bool trans_a,
               bool trans_b, int lda, int ldb, int ldd, float beta, cudaStream_t stream) {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const cudaDataType_t type = data_type<T>();
  check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
  if (bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "epilogue");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "bias");
  }
  check(cublasLtMatrixLayoutCreate(&la, type, trans_a ? k : m, trans_a ? m : k, lda), "layout A");
  check(cublasLtMatrixLayoutCreate(&lb, type, trans_b ? n : k, trans_b ? k : n, ldb), "layout B");
  check(cublasLtMatrixLayoutCreate(&ld, type, m, n, ldd), "layout D");
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  size_t ws = blas.workspace_bytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        "workspace preference");
  // Parameters are slices of one flat buffer: tell cuBLASLt how aligned each pointer really is
  // (it assumes 256 bytes otherwise and may pick a kernel that cannot run on a slice).
  const void* ptrs[3] = {a, b, d};
  const cublasLtMatmulPreferenceAttributes_t keys[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    uint32_t align = alignment_of(ptrs[i < 3 ? i : 2]);
    check(cublasLtMatmulPreferenceSetAttribute(pref, keys[i], &align, sizeof(align)), "alignment preference");
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(blas.handle, op, la, lb, ld, ld, pref, 1, &heuristic, &found), "heuristic");
  if (found == 0) throw Error(ErrorKind::Unsupported, "cuBLASLt has no algorithm for this GPT-2 matmul shape");
  const float alpha = 1.0f;
  check(cublasLtMatmul(blas.handle, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo, blas.workspace,
                       blas.workspace_bytes, stream),
        "matmul");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
}

// dbias[o] += sum over rows of dout[:, o]; consecutive threads read consecutive columns.
template <class T>
__global__ void bias_grad_kernel(T* dbias, const T* dout, size_t N, int OC) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < OC; o += gridDim.x * blockDim.x) {
    float s = 0;
    for (size_t r = 0; r < N; ++r) s += to_f(dout[r * OC + o]);
    dbias[o] = from_f<T>(to_f(dbias[o]) + s);
  }
}

}  // namespace

GPT2Blas gpt2_blas_create() {
  GPT2Blas blas;
  check(cublasLtCreate(&blas.handle), "create");
  if (cudaMalloc(&blas.workspace, kWorkspaceBytes) != cudaSuccess)
    throw Error(ErrorKind::Internal, "cannot allocate the 32 MiB cuBLASLt workspace on the GPU");
  blas.workspace_bytes = kWorkspaceBytes;
  return blas;
}

void gpt2_blas_destroy(GPT2Blas& blas) {
  if (blas.workspace) cudaFree(blas.workspace);
  if (blas.handle) cublasLtDestroy(blas.handle);
  blas = GPT2Blas{};
}

template <class T>
void gpt2_matmul_forward(const GPT2Blas& blas, T* out, const T* inp, const T* weight, const T* bias, size_t N, int C,
                         int OC, cudaStream_t stream) {
  lt_matmul(blas, out, weight, inp, bias, OC, static_cast<int>(N), C, true, false, C, C, OC, 0.0f, stream);
}

template <class T>
void gpt2_matmul_backward(const GPT2Blas& blas, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, size_t N, int C, int OC, cudaStream_t stream) {
  const T* no_bias = nullptr;
  lt_matmul(blas, dinp, weight, dout, no_bias, C, static_cast<int>(N), OC, false, false, C, OC, C, 0.0f, stream);
  lt_matmul(blas, dweight, inp, dout, no_bias, C, OC, static_cast<int>(N), false, true, C, OC, C, 1.0f, stream);
  if (dbias) {
    bias_grad_kernel<<<grid_for(OC), kBlock, 0, stream>>>(dbias, dout, N, OC);
    check_launch("gpt2_matmul_backward bias");
  }
}

template void gpt2_matmul_forward<float>(const GPT2Blas&, float*, const float*, const float*, const float*, size_t,
                                         int, int, cudaStream_t);
template void gpt2_matmul_forward<__nv_bfloat16>(const GPT2Blas&, __nv_bfloat16*, const __nv_bfloat16*,
                                                 const __nv_bfloat16*, const __nv_bfloat16*, size_t, int, int,
                                                 cudaStream_t);
template void gpt2_matmul_backward<float>(const GPT2Blas&, float*, float*, float*, const float*, const float*,
                                          const float*, size_t, int, int, cudaStream_t);
template void gpt2_matmul_backward<__nv_bfloat16>(const GPT2Blas&, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                  const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                  size_t, int, int, cudaStream_t);
template void gpt2_matmul_forward<__half>(const GPT2Blas&, __half*, const __half*, const __half*, const __half*, size_t,
                                          int, int, cudaStream_t);
template void gpt2_matmul_backward<__half>(const GPT2Blas&, __half*, __half*, __half*, const __half*, const __half*,
                                           const __half*, size_t, int, int, cudaStream_t);

}  // namespace dsx::kernels::cuda
