// bf16 GEMM on the CPU: oneDNN's matmul where the CPU has AVX512_BF16, else the fp32 GEMM on the
// widened operands (see gemm_bf16.h).
#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "dsx/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/loops.h"
#include "kernels/dtype.h"
#include "kernels/mixed_precision.h"
#ifdef DSX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace dsx::kernels::cpu {
namespace {

bool env_says_off() {
  const char* v = std::getenv("DSX_CPU_BF16_GEMM");
  return v && (!std::strcmp(v, "off") || !std::strcmp(v, "0") || !std::strcmp(v, "false"));
}

// The widened product: exact bf16 x bf16 products summed in fp32, like the native kernel.
void gemm_bf16_as_fp32(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const uint16_t* a,
                       size_t lda, const uint16_t* b, size_t ldb, bool accumulate, float* c,
                       size_t ldc) {
  auto widen = [](const uint16_t* src, size_t rows, size_t cols, size_t ld) {
    std::vector<float> out(rows * cols);
    for (size_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < cols; ++j) out[r * cols + j] = bf16_to_float(src[r * ld + j]);
    return out;
  };
  const size_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  std::vector<float> a32 = widen(a, trans_a ? k : m, a_cols, lda);
  std::vector<float> b32 = widen(b, trans_b ? n : k, b_cols, ldb);
  gemm<float>(trans_a, trans_b, m, n, k, 1.0f, a32.data(), a_cols, b32.data(), b_cols,
              accumulate ? 1.0f : 0.0f, c, ldc);
}

#ifdef DSX_HAVE_DNNL
bool cpu_has_bf16_kernels() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A row-major (rows, cols) view whose rows are `ld` apart, or its transpose when `trans`.
dnnl::memory::desc matrix(size_t rows, size_t cols, size_t ld, bool trans,
                          dnnl::memory::data_type type) {
  using dims = dnnl::memory::dims;
  const auto r = static_cast<int64_t>(rows), c = static_cast<int64_t>(cols),
             l = static_cast<int64_t>(ld);
  return dnnl::memory::desc(dims{r, c}, type, trans ? dims{1, l} : dims{l, 1});
}

using PlanKey = std::tuple<bool, bool, size_t, size_t, size_t, size_t, size_t, size_t>;

// Building a primitive costs tens of microseconds; a training step repeats the same few shapes,
// so each thread keeps the ones it has built.
dnnl::matmul& matmul_for(const PlanKey& key) {
  thread_local std::map<PlanKey, dnnl::matmul> plans;
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const auto [trans_a, trans_b, m, n, k, lda, ldb, ldc] = key;
  using dt = dnnl::memory::data_type;
  dnnl::primitive_attr attr;
  dnnl::matmul::desc desc(matrix(m, k, lda, trans_a, dt::bf16), matrix(k, n, ldb, trans_b, dt::bf16),
                          matrix(m, n, ldc, false, dt::f32));
  dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  return plans.emplace(key, dnnl::matmul(pd)).first->second;
}

// C = op(A) op(B); gemm_bf16_dnnl_accumulate adds.
void gemm_bf16_dnnl(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const uint16_t* a,
                    size_t lda, const uint16_t* b, size_t ldb, float* c, size_t ldc) {
  using dt = dnnl::memory::data_type;
  try {
    dnnl::matmul& mm = matmul_for({trans_a, trans_b, m, n, k, lda, ldb, ldc});
    dnnl::engine& engine = cpu_engine();
    dnnl::memory am(matrix(m, k, lda, trans_a, dt::bf16), engine, const_cast<uint16_t*>(a));
    dnnl::memory bm(matrix(k, n, ldb, trans_b, dt::bf16), engine, const_cast<uint16_t*>(b));
    dnnl::memory cm(matrix(m, n, ldc, false, dt::f32), engine, c);
    dnnl::stream stream(engine);
    mm.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::Internal, "oneDNN bf16 matmul " + std::to_string(m) + "x" +
                                         std::to_string(n) + "x" + std::to_string(k) +
                                         " failed: " + e.what() +
                                         "; set DSX_CPU_BF16_GEMM=off to multiply in fp32");
  }
}

// C += op(A) op(B) through a product into scratch, then an add, in chunks of C's rows. With
// oneDNN's sum post-op (C read inside the kernel) a weight gradient's GEMM at GPT-2's shapes
// (k = 512 tokens, C up to 2048 x 384) ran 14-21% slower than this on the 2-core Zen 5 VM.
// The chunk bounds the scratch at 1 MiB.
constexpr size_t kAccumulateChunkFloats = size_t(1) << 18;

void gemm_bf16_dnnl_accumulate(bool trans_a, bool trans_b, size_t m, size_t n, size_t k,
                               const uint16_t* a, size_t lda, const uint16_t* b, size_t ldb,
                               float* c, size_t ldc) {
  thread_local std::vector<float> scratch;
  const size_t chunk = std::max<size_t>(1, std::min(m, kAccumulateChunkFloats / n));
  if (scratch.size() < chunk * n) scratch.resize(chunk * n);
  for (size_t r0 = 0; r0 < m; r0 += chunk) {
    const size_t rows = std::min(chunk, m - r0);
    const uint16_t* a_rows = trans_a ? a + r0 : a + r0 * lda;  // op(A)'s rows [r0, r0 + rows)
    gemm_bf16_dnnl(trans_a, trans_b, rows, n, k, a_rows, lda, b, ldb, scratch.data(), n);
    const float* product = scratch.data();
    for (size_t r = 0; r < rows; ++r) {
      float* out = c + (r0 + r) * ldc;
      const float* in = product + r * n;
      for_each_element(n, [=](size_t j) DSX_ALWAYS_INLINE { out[j] += in[j]; });
    }
  }
}
#endif

}  // namespace

Bf16GemmChoice bf16_gemm_choice() {
  if (env_says_off())
    return {false, "bf16 GEMMs on the CPU: DSX_CPU_BF16_GEMM=off, so they multiply in fp32"};
#ifdef DSX_HAVE_DNNL
  if (!cpu_has_bf16_kernels())
    return {false, "bf16 GEMMs on the CPU: this CPU has no AVX512_BF16 (or ONEDNN_MAX_CPU_ISA "
                   "hides it), so they multiply in fp32"};
  return {true, "bf16 GEMMs on the CPU: oneDNN " + std::to_string(dnnl_version()->major) + "." +
                    std::to_string(dnnl_version()->minor) + " bf16 x bf16 -> fp32"};
#else
  return {false, "bf16 GEMMs on the CPU: this dsx was built without oneDNN (libdnnl-dev), so "
                 "they multiply in fp32"};
#endif
}

void gemm_bf16(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const uint16_t* a,
               size_t lda, const uint16_t* b, size_t ldb, bool accumulate, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef DSX_HAVE_DNNL
  if (!env_says_off() && cpu_has_bf16_kernels()) {
    if (accumulate)
      gemm_bf16_dnnl_accumulate(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
    else
      gemm_bf16_dnnl(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
#endif
  gemm_bf16_as_fp32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

void to_bf16(uint16_t* out, const float* in, size_t count) {
  cast(DType::F32, in, DType::BF16, out, count);  // the SIMD loop of kernels/mixed_precision.h
}

}  // namespace dsx::kernels::cpu
