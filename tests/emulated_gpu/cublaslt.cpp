// cuBLASLt on the emulated GPU: the descriptors, layouts, transposes, epilogues and types dsx
// uses, computed by OpenBLAS's sgemm on the stream's worker. fp32, bf16 and fp16 storage with fp32
// compute and scale; the 16-bit inputs widen to float and the output rounds once, as cuBLASLt's
// fp32 accumulation does. Anything else (another compute type, batches, row-major order, other
// epilogues) fails with CUBLAS_STATUS_NOT_SUPPORTED and says which attribute.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/emulated_gpu/runtime.h"

using dsx::emu::say;

struct cublasLtContext {
  int device = 0;
};

namespace {

struct Desc {
  cublasComputeType_t compute{};
  cudaDataType_t scale{};
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};

struct Layout {
  cudaDataType_t type{};
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

struct Preference {
  size_t workspace = 0;
};

cublasStatus_t unsupported(const std::string& what) {
  say("cuBLASLt: " + what + " is not emulated (tests/emulated_gpu/cublaslt.cpp)");
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

template <class T>
T read_value(const void* buf, size_t size) {
  T v{};
  if (size == sizeof(T)) std::memcpy(&v, buf, sizeof(T));
  return v;
}

bool storage_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// The column-major matrix of a layout, widened to float.
std::vector<float> widen(const Layout& l, const void* p) {
  std::vector<float> out(size_t(l.ld) * l.cols);
  const size_t n = size_t(l.ld) * (l.cols - 1) + l.rows;
  for (size_t i = 0; i < n; ++i) {
    if (l.type == CUDA_R_32F) out[i] = static_cast<const float*>(p)[i];
    else if (l.type == CUDA_R_16BF) out[i] = __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    else out[i] = __half2float(static_cast<const __half*>(p)[i]);
  }
  return out;
}

void narrow(const Layout& l, const std::vector<float>& m, void* p) {
  for (uint64_t c = 0; c < l.cols; ++c)
    for (uint64_t r = 0; r < l.rows; ++r) {
      const size_t i = size_t(c) * size_t(l.ld) + r;
      if (l.type == CUDA_R_32F) static_cast<float*>(p)[i] = m[i];
      else if (l.type == CUDA_R_16BF) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(m[i]);
      else static_cast<__half*>(p)[i] = __float2half_rn(m[i]);
    }
}

// Whether a layout's elements lie in one device allocation.
bool in_device_memory(const Layout& l, const void* p, const char* name) {
  std::string why;
  const size_t bytes = (size_t(l.ld) * (l.cols - 1) + l.rows) * element_bytes(l.type);
  if (dsx::emu::check_range(p, bytes, dsx::emu::MemoryKind::Device, &why)) return true;
  say(std::string("cublasLtMatmul: matrix ") + name + ": " + why);
  return false;
}

cublasStatus_t check_plan(const Desc& d, const Layout& a, const Layout& b, const Layout& c,
                          const Layout& out) {
  if (d.compute != CUBLAS_COMPUTE_32F) return unsupported("a compute type other than CUBLAS_COMPUTE_32F");
  if (d.scale != CUDA_R_32F) return unsupported("a scale type other than CUDA_R_32F");
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && d.epilogue != CUBLASLT_EPILOGUE_BIAS)
    return unsupported("epilogue " + std::to_string(int(d.epilogue)));
  if (a.type != b.type || a.type != c.type || a.type != out.type || !storage_type(a.type))
    return unsupported("mixed or non-fp32/fp16/bf16 matrix types");
  const uint64_t m = out.rows, n = out.cols;
  const uint64_t k = d.trans_a == CUBLAS_OP_N ? a.cols : a.rows;
  if ((d.trans_a == CUBLAS_OP_N ? a.rows : a.cols) != m || (d.trans_b == CUBLAS_OP_N ? b.rows : b.cols) != k ||
      (d.trans_b == CUBLAS_OP_N ? b.cols : b.rows) != n || c.rows != m || c.cols != n) {
    say("cublasLtMatmul: the layouts' shapes do not chain (A, B, C, D)");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasLtContext{dsx::emu::current_device()};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<Desc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  auto* d = reinterpret_cast<Desc*>(desc);
  if (!d || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: d->trans_a = read_value<cublasOperation_t>(buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: d->trans_b = read_value<cublasOperation_t>(buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: d->epilogue = read_value<cublasLtEpilogue_t>(buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: d->bias = read_value<const void*>(buf, size); break;
    default: return unsupported("matmul descriptor attribute " + std::to_string(int(attr)));
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout || ld < int64_t(rows) || rows == 0 || cols == 0) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t attr,
                                                const void*, size_t) {
  return unsupported("matrix layout attribute " + std::to_string(int(attr)));
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  auto* p = reinterpret_cast<Preference*>(pref);
  if (!p || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: p->workspace = read_value<size_t>(buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      if (size != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      break;  // sgemm takes any alignment
    default: return unsupported("matmul preference attribute " + std::to_string(int(attr)));
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
  if (!handle || !desc || !a || !b || !c || !d || !pref || !results || !found || requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  *found = 0;
  const cublasStatus_t s =
      check_plan(*reinterpret_cast<Desc*>(desc), *reinterpret_cast<Layout*>(a), *reinterpret_cast<Layout*>(b),
                 *reinterpret_cast<Layout*>(c), *reinterpret_cast<Layout*>(d));
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha_p,
                              const void* A, cublasLtMatrixLayout_t a_layout, const void* B,
                              cublasLtMatrixLayout_t b_layout, const void* beta_p, const void* C,
                              cublasLtMatrixLayout_t c_layout, void* D, cublasLtMatrixLayout_t d_layout,
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t stream) {
  if (!handle || !desc || !alpha_p || !beta_p || !a_layout || !b_layout || !c_layout || !d_layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  const Desc op = *reinterpret_cast<Desc*>(desc);
  const Layout a = *reinterpret_cast<Layout*>(a_layout), b = *reinterpret_cast<Layout*>(b_layout),
               c = *reinterpret_cast<Layout*>(c_layout), d = *reinterpret_cast<Layout*>(d_layout);
  if (cublasStatus_t s = check_plan(op, a, b, c, d); s != CUBLAS_STATUS_SUCCESS) return s;
  if (c.ld != d.ld) return unsupported("C and D with different layouts");
  if (dsx::emu::stream_device(stream) != handle->device) {
    say("cublasLtMatmul: the stream belongs to another GPU than the handle");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // alpha and beta are host scalars (the default pointer mode).
  const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
  if (!in_device_memory(a, A, "A") || !in_device_memory(b, B, "B") || !in_device_memory(d, D, "D") ||
      (beta != 0.0f && !in_device_memory(c, C, "C")))
    return CUBLAS_STATUS_INVALID_VALUE;
  const void* bias = op.epilogue == CUBLASLT_EPILOGUE_BIAS ? op.bias : nullptr;
  if (op.epilogue == CUBLASLT_EPILOGUE_BIAS) {
    const Layout bias_layout{d.type, d.rows, 1, int64_t(d.rows)};
    if (!bias || !in_device_memory(bias_layout, bias, "bias")) return CUBLAS_STATUS_INVALID_VALUE;
  }
  auto extent = [](const Layout& l) { return (size_t(l.ld) * (l.cols - 1) + l.rows) * element_bytes(l.type); };
  std::vector<dsx::emu::Touch> touches{{A, extent(a), false}, {B, extent(b), false}, {D, extent(d), true}};
  if (beta != 0.0f) touches.push_back({C, extent(c), false});
  if (bias) touches.push_back({bias, d.rows * element_bytes(d.type), false});
  const cudaError_t e = dsx::emu::enqueue(stream, "cublasLtMatmul", [=]() -> std::string {
    const std::vector<float> fa = widen(a, A), fb = widen(b, B);
    std::vector<float> fd(size_t(d.ld) * d.cols, 0.0f);
    if (beta != 0.0f) fd = widen(c, C);
    const int k = int(op.trans_a == CUBLAS_OP_N ? a.cols : a.rows);
    cblas_sgemm(CblasColMajor, op.trans_a == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                op.trans_b == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, int(d.rows), int(d.cols), k, alpha,
                fa.data(), int(a.ld), fb.data(), int(b.ld), beta, fd.data(), int(d.ld));
    if (bias) {
      const std::vector<float> fbias = widen({d.type, d.rows, 1, int64_t(d.rows)}, bias);
      for (uint64_t col = 0; col < d.cols; ++col)
        for (uint64_t row = 0; row < d.rows; ++row) fd[size_t(col) * size_t(d.ld) + row] += fbias[row];
    }
    narrow(d, fd, D);
    return {};
  }, touches);
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
