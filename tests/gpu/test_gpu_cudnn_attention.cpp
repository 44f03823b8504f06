// cuDNN fused attention (kernels/cuda/cudnn_attention.h) against a float64 CPU reference of causal
// softmax attention with grouped-query heads: forward output, the log-sum-exp stats, and dq, dk, dv
// from a random dout, in bf16 and fp16. The reference takes the same 16-bit inputs (rounded once),
// so the differences are cuDNN's 16-bit outputs and its internal 16-bit probabilities. The GPU
// cases skip when no GPU is visible or supported() says no (an older GPU or cuDNN); the cases that
// need no GPU (what supported() refuses up front) run everywhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/dtype.h"

namespace dsx::kernels::cuda {
namespace {

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    cuda_ok(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  void upload(const void* src) {
    cuda_ok(cudaMemcpy(ptr_, src, bytes_, cudaMemcpyHostToDevice), "upload");
  }
  void download(void* dst) const {
    cuda_ok(cudaMemcpy(dst, ptr_, bytes_, cudaMemcpyDeviceToHost), "download");
  }
  // All bytes 0xff: NaN in bf16, fp16 and fp32, so an output cuDNN does not write shows up.
  void poison() { cuda_ok(cudaMemset(ptr_, 0xff, bytes_), "cudaMemset"); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// The test as the workspace's owner (a model allocates through device/): each growth a new
// buffer, the old ones kept until the test ends, after the work that used them.
struct GrowingWorkspace {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<size_t> asked;
  WorkspaceGrow grow() {
    return [this](size_t bytes) {
      asked.push_back(bytes);
      buffers.push_back(std::make_unique<DeviceBuffer>(bytes));
      return Workspace{buffers.back()->get(), bytes};
    };
  }
};

// Random 16-bit values and their exact float64 values.
struct Half16 {
  std::vector<uint16_t> bits;
  std::vector<double> value;
};

Half16 random_16bit(DType dtype, size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  Half16 h{std::vector<uint16_t>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    store_from_float(dtype, h.bits.data(), i, dist(rng));
    h.value[i] = load_as_float(dtype, h.bits.data(), i);
  }
  return h;
}

std::vector<double> as_double(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = load_as_float(dtype, bits.data(), i);
  return out;
}

// Causal softmax attention in float64. q, out, dout, dq: (B, T, NH, D); k, v, dk, dv: (B, T, KV,
// D); lse: (B, NH, T). Query head h reads key/value head h / (NH / KV).
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

Reference reference(const AttentionShape& s, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v,
                    const std::vector<double>& dout) {
  const int B = s.B, T = s.T, NH = s.NH, KV = s.KV, D = s.D, group = NH / KV;
  const auto qi = [&](int b, int t, int h, int d) {
    return ((size_t(b) * T + t) * NH + h) * D + d;
  };
  const auto ki = [&](int b, int t, int g, int d) {
    return ((size_t(b) * T + t) * KV + g) * D + d;
  };
  Reference r{std::vector<double>(q.size()), std::vector<double>(size_t(B) * NH * T),
              std::vector<double>(q.size()), std::vector<double>(k.size()),
              std::vector<double>(k.size())};
  std::vector<double> p(T), dp(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / group;
      for (int i = 0; i < T; ++i) {
        double max = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q[qi(b, i, h, d)] * k[ki(b, j, g, d)];
          p[j] = dot * s.scale;
          max = std::max(max, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(p[j] - max);
        const double lse = max + std::log(sum);
        r.lse[(size_t(b) * NH + h) * T + i] = lse;
        for (int j = 0; j <= i; ++j) p[j] = std::exp(p[j] - lse);
        for (int d = 0; d < D; ++d) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += p[j] * v[ki(b, j, g, d)];
          r.out[qi(b, i, h, d)] = o;
        }
        // Backward of row i: dP = dO.V^T, dS = P * (dP - rowsum(P * dP)), dQ = scale dS.K,
        // dK += scale dS^T.Q, dV += P^T.dO (summed over the group's query heads).
        double row = 0;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += dout[qi(b, i, h, d)] * v[ki(b, j, g, d)];
          dp[j] = dot;
          row += p[j] * dot;
        }
        for (int j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - row) * s.scale;
          for (int d = 0; d < D; ++d) {
            r.dq[qi(b, i, h, d)] += ds * k[ki(b, j, g, d)];
            r.dk[ki(b, j, g, d)] += ds * q[qi(b, i, h, d)];
            r.dv[ki(b, j, g, d)] += p[j] * dout[qi(b, i, h, d)];
          }
        }
      }
    }
  return r;
}

// Every element within `rel` of the reference's largest magnitude, and the whole within `l2` in
// relative L2 norm. A wrong mask, layout or head grouping is off by O(1) on both.
::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want,
                                 double rel, double l2, const std::string& what) {
  double max_ref = 0, diff2 = 0, ref2 = 0, worst = 0;
  size_t worst_i = 0;
  for (double w : want) max_ref = std::max(max_ref, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(got[i] - want[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d, worst_i = i;
    diff2 += (got[i] - want[i]) * (got[i] - want[i]);
    ref2 += want[i] * want[i];
  }
  const double rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-300));
  if (worst <= rel * max_ref && rel_l2 <= l2) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": element " << worst_i << " is " << got[worst_i] << ", the reference "
         << want[worst_i] << " (largest |reference| " << max_ref << ", allowed " << rel * max_ref
         << "); relative L2 " << rel_l2 << " (allowed " << l2 << ")";
}

struct Case {
  int B, T, NH, KV, D;
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.dtype)) + "_B" + std::to_string(c.B) + "_T" +
         std::to_string(c.T) + "_NH" + std::to_string(c.NH) + "_KV" + std::to_string(c.KV) + "_D" +
         std::to_string(c.D);
}

// For gtest's and ctest's listing: the case's name, not a dump of its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " B " << c.B << " T " << c.T << " NH " << c.NH << " KV " << c.KV
      << " D " << c.D;
}

class CudnnAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudnnAttentionTest, MatchesFloat64Reference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  const Case c = GetParam();
  AttentionShape s;
  s.B = c.B, s.T = c.T, s.NH = c.NH, s.KV = c.KV, s.D = c.D, s.dtype = c.dtype;
  s.scale = 1.0f / std::sqrt(float(c.D));

  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  GrowingWorkspace workspace;
  CudnnAttention attention(stream, workspace.grow());
  if (!attention.supported(s))
    GTEST_SKIP() << "cuDNN has no fused attention engine for this GPU and shape";

  const size_t nq = size_t(s.B) * s.T * s.NH * s.D, nk = size_t(s.B) * s.T * s.KV * s.D;
  const size_t nstats = size_t(s.B) * s.NH * s.T;
  std::mt19937 rng(1234 + c.T + c.KV + int(c.dtype));
  // Scaled so that the scores span a few units: softmax rows neither uniform nor one-hot.
  Half16 q = random_16bit(s.dtype, nq, rng, 2.0f), k = random_16bit(s.dtype, nk, rng, 2.0f);
  Half16 v = random_16bit(s.dtype, nk, rng, 1.0f), dout = random_16bit(s.dtype, nq, rng, 1.0f);
  const Reference ref = reference(s, q.value, k.value, v.value, dout.value);

  DeviceBuffer dev_q(nq * 2), dev_k(nk * 2), dev_v(nk * 2), dev_dout(nq * 2), dev_out(nq * 2),
      dev_stats(nstats * 4);
  DeviceBuffer dev_dq(nq * 2), dev_dk(nk * 2), dev_dv(nk * 2);
  dev_q.upload(q.bits.data());
  dev_k.upload(k.bits.data());
  dev_v.upload(v.bits.data());
  dev_dout.upload(dout.bits.data());
  for (DeviceBuffer* b : {&dev_out, &dev_stats, &dev_dq, &dev_dk, &dev_dv})
    b->poison();  // overwritten, not accumulated

  attention.forward(s, dev_q.get(), dev_k.get(), dev_v.get(), dev_out.get(),
                    static_cast<float*>(dev_stats.get()));
  attention.backward(s, dev_q.get(), dev_k.get(), dev_v.get(), dev_out.get(), dev_dout.get(),
                     static_cast<const float*>(dev_stats.get()), dev_dq.get(), dev_dk.get(),
                     dev_dv.get());
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  std::vector<uint16_t> out(nq), g_q(nq), g_k(nk), g_v(nk);
  std::vector<float> stats(nstats);
  dev_out.download(out.data());
  dev_stats.download(stats.data());
  dev_dq.download(g_q.data());
  dev_dk.download(g_k.data());
  dev_dv.download(g_v.data());

  // bf16 keeps 8 significant bits, fp16 11; cuDNN also rounds the probabilities to the IO type
  // before P.V and dS before its matmuls.
  const bool bf16 = s.dtype == DType::BF16;
  const double out_rel = bf16 ? 2e-2 : 4e-3, out_l2 = bf16 ? 1e-2 : 2e-3;
  const double grad_rel = bf16 ? 4e-2 : 8e-3, grad_l2 = bf16 ? 2e-2 : 4e-3;
  EXPECT_TRUE(close(as_double(s.dtype, out), ref.out, out_rel, out_l2, "out"));
  // The stats come from fp32 arithmetic on the same inputs: close to the exact log-sum-exp.
  std::vector<double> lse(stats.begin(), stats.end());
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < nstats; ++i) {
    const double d = std::abs(lse[i] - ref.lse[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d, worst_i = i;
  }
  EXPECT_LE(worst, 1e-3 + 1e-4 * std::abs(ref.lse[worst_i]))
      << "stats[" << worst_i << "] " << lse[worst_i] << ", log-sum-exp " << ref.lse[worst_i];
  EXPECT_TRUE(close(as_double(s.dtype, g_q), ref.dq, grad_rel, grad_l2, "dq"));
  EXPECT_TRUE(close(as_double(s.dtype, g_k), ref.dk, grad_rel, grad_l2, "dk"));
  EXPECT_TRUE(close(as_double(s.dtype, g_v), ref.dv, grad_rel, grad_l2, "dv"));

  // A second call reuses the cached graphs and gives the same bits (cuDNN's forward is
  // deterministic).
  std::vector<uint16_t> again(nq);
  attention.forward(s, dev_q.get(), dev_k.get(), dev_v.get(), dev_out.get(),
                    static_cast<float*>(dev_stats.get()));
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  dev_out.download(again.data());
  EXPECT_EQ(again, out);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudnnAttentionTest,
    ::testing::Values(Case{2, 64, 8, 2, 64, DType::BF16}, Case{2, 128, 8, 2, 64, DType::BF16},
                      Case{2, 64, 8, 2, 64, DType::F16}, Case{2, 128, 8, 2, 64, DType::F16},
                      Case{1, 128, 4, 4, 128, DType::BF16}),  // plain multi-head
    case_name);

// What supported() refuses before asking cuDNN: no GPU needed (no handle is made for these).
TEST(CudnnAttention, RefusesWhatItCannotTake) {
  GrowingWorkspace workspace;
  CudnnAttention attention(nullptr, workspace.grow());
  AttentionShape s;
  s.B = 2, s.T = 64, s.NH = 8, s.KV = 2, s.D = 64, s.scale = 0.125f;
  s.dtype = DType::F32;
  EXPECT_FALSE(attention.supported(s)) << "fp32";
  EXPECT_FALSE(attention.supported(s)) << "fp32, the cached answer";
  s.dtype = DType::BF16;
  s.D = 60;
  EXPECT_FALSE(attention.supported(s)) << "head size 60";
  s.D = 264;
  EXPECT_FALSE(attention.supported(s)) << "head size 264";
  s.D = 64;
  s.KV = 3;
  EXPECT_FALSE(attention.supported(s)) << "KV 3 does not divide NH 8";
  s.KV = 2;
  s.dtype = DType::F32;
  try {
    attention.forward(s, nullptr, nullptr, nullptr, nullptr, nullptr);
    ADD_FAILURE() << "forward on fp32 did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("fp32"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(workspace.asked.empty()) << "a refused shape asked its owner for a workspace";
}

}  // namespace
}  // namespace dsx::kernels::cuda
