// The CUDA kernels against the CPU kernels (which tests/kernels/ checks against float64): same
// cases (every optimizer and mode, copy-out dtypes, lengths 0..1000003, aligned buffers for the
// vector path and offset ones for the scalar path), same element formulas, so results agree to
// within 2 ulp (both sides compile without FMA contraction; in practice they are bitwise equal).
// Skips when no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>

#include "kernels/cpu/decoder_layers.h"
#include "kernels/cuda/batch_tokens.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/cuda/optimizers.h"
#include "kernels/mixed_precision.h"
#include "kernels/optimizers.h"
#include "kernels/token_rows.h"
#include "tests/gpu/gpu_test_sizes.h"
#include "tests/kernels/kernel_test_util.h"

namespace dsx::kernels::test {
namespace {

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define DSX_REQUIRE_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible"

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device memory holding a copy of a host range; freed on scope exit.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    cuda_ok(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc");
  }
  ~DeviceMemory() { cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <class T = void>
  T* get(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr_) + byte_offset);
  }
  void upload(const void* src, size_t bytes, size_t byte_offset = 0) {
    cuda_ok(cudaMemcpy(get<char>(byte_offset), src, bytes, cudaMemcpyHostToDevice), "upload");
  }
  void download(void* dst, size_t bytes, size_t byte_offset = 0) const {
    cuda_ok(cudaMemcpy(dst, get<char>(byte_offset), bytes, cudaMemcpyDeviceToHost), "download");
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? int64_t(INT32_MIN) - i : i;
}

::testing::AssertionResult within_ulps(const float* gpu, const float* cpu, size_t n, int64_t ulps,
                                       const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(gpu[i]) && std::isnan(cpu[i])) continue;
    if (std::llabs(ordered(gpu[i]) - ordered(cpu[i])) > ulps)
      return ::testing::AssertionFailure()
             << what << ": element " << i << " GPU " << gpu[i] << " CPU " << cpu[i];
  }
  return ::testing::AssertionSuccess();
}

using Call = std::function<void(float* const* buffers, size_t n, ParamCopy copy)>;

// Runs `cpu` and `gpu` on the same random buffers (0: param, 1: grad, rest: state) and compares.
void compare_optimizer(const std::string& name, const std::vector<BufferInit>& init,
                       const Call& cpu, const Call& gpu) {
  ScopedSimdLevel scalar(SimdLevel::Scalar);
  const size_t num = init.size();
  for (size_t n : gpu_test_lengths()) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      for (int copy_kind = -1; copy_kind <= int(DType::BF16); ++copy_kind) {
        std::string what = name + " n=" + std::to_string(n) + " offset=" + std::to_string(offset) +
                           " copy=" + (copy_kind < 0 ? "none" : dtype_name(DType(copy_kind)));
        std::vector<FloatBuffer> host;
        for (size_t b = 0; b < num; ++b) {
          host.emplace_back(n, offset);
          fill_normal(host[b], n, init[b].mean, init[b].stddev, uint32_t(7 * b + n));
          if (init[b].non_negative)
            for (size_t i = 0; i < n; ++i) host[b][i] = std::fabs(host[b][i]);
        }
        std::vector<FloatBuffer> gpu_result = host;
        // Device: one allocation per buffer, data starting `offset` floats in (offset 1: scalar
        // path).
        std::vector<std::unique_ptr<DeviceMemory>> dev;
        std::vector<float*> dev_ptrs, host_ptrs;
        for (size_t b = 0; b < num; ++b) {
          dev.push_back(std::make_unique<DeviceMemory>((n + offset) * sizeof(float)));
          dev.back()->upload(host[b].data(), n * sizeof(float), offset * sizeof(float));
          dev_ptrs.push_back(dev.back()->get<float>(offset * sizeof(float)));
          host_ptrs.push_back(host[b].data());
        }
        DeviceMemory dev_copy((n + offset) * 4);
        std::vector<uint16_t> host_copy(n * 2 + 1), gpu_copy(n * 2 + 1);
        ParamCopy cpu_copy, gpu_param_copy;
        if (copy_kind >= 0) {
          DType t = DType(copy_kind);
          cpu_copy = {t, host_copy.data()};
          gpu_param_copy = {t, dev_copy.get(offset * dtype_size(t))};
        }
        cpu(host_ptrs.data(), n, cpu_copy);
        gpu(dev_ptrs.data(), n, gpu_param_copy);
        cuda_ok(cudaDeviceSynchronize(), what.c_str());
        for (size_t b = 0; b < num; ++b) {
          if (b == 1) continue;
          dev[b]->download(gpu_result[b].data(), n * sizeof(float), offset * sizeof(float));
          ASSERT_TRUE(within_ulps(gpu_result[b].data(), host[b].data(), n, 2,
                                  what + " buffer " + std::to_string(b)));
        }
        if (copy_kind >= 0) {
          DType t = DType(copy_kind);
          dev_copy.download(gpu_copy.data(), n * dtype_size(t), offset * dtype_size(t));
          for (size_t i = 0; i < n; ++i) {
            float g = load_as_float(t, gpu_copy.data(), i);
            uint8_t want[4];
            store_from_float(t, want, 0, gpu_result[0][i]);  // the GPU's copy is its own p, rounded
            ASSERT_EQ(g, load_as_float(t, want, 0)) << what << " copy element " << i;
          }
        }
      }
    }
  }
}

const std::vector<BufferInit> kAdamInit{
    {0, 1, false}, {0, 0.1f, false}, {0, 0.05f, false}, {0, 0.01f, true}};

TEST(GpuAdam, MatchesCpu) {
  DSX_REQUIRE_GPU();
  for (bool adamw : {true, false}) {
    for (bool bias : {true, false}) {
      AdamHyper h;
      h.weight_decay = 0.1f;
      h.adam_w_mode = adamw;
      h.bias_correction = bias;
      compare_optimizer(
          std::string("adam w_mode=") + (adamw ? "1" : "0") + " bias=" + (bias ? "1" : "0"),
          kAdamInit,
          [&](float* const* b, size_t n, ParamCopy c) {
            adam_step(h, 5, 0.5f, b[0], b[1], b[2], b[3], n, c);
          },
          [&](float* const* b, size_t n, ParamCopy c) {
            cuda::adam_step(h, 5, 0.5f, b[0], b[1], b[2], b[3], n, c, 0);
          });
    }
  }
}

TEST(GpuLion, MatchesCpu) {
  DSX_REQUIRE_GPU();
  LionHyper h;
  h.weight_decay = 0.1f;
  compare_optimizer(
      "lion", {{0, 1, false}, {0, 0.1f, false}, {0, 0.05f, false}},
      [&](float* const* b, size_t n, ParamCopy c) { lion_step(h, 1.0f, b[0], b[1], b[2], n, c); },
      [&](float* const* b, size_t n, ParamCopy c) {
        cuda::lion_step(h, 1.0f, b[0], b[1], b[2], n, c, 0);
      });
}

TEST(GpuSgd, MatchesCpu) {
  DSX_REQUIRE_GPU();
  for (float momentum : {0.0f, 0.9f}) {
    for (bool nesterov : {false, true}) {
      for (int64_t step : {int64_t{1}, int64_t{2}}) {
        SgdHyper h;
        h.lr = 0.01f;
        h.momentum = momentum;
        h.nesterov = nesterov;
        h.weight_decay = 0.01f;
        compare_optimizer(
            "sgd momentum=" + std::to_string(momentum) + " nesterov=" + (nesterov ? "1" : "0") +
                " step=" + std::to_string(step),
            {{0, 1, false}, {0, 0.1f, false}, {0, 0.1f, false}},
            [&](float* const* b, size_t n, ParamCopy c) {
              sgd_step(h, step, 1.0f, b[0], b[1], b[2], n, c);
            },
            [&](float* const* b, size_t n, ParamCopy c) {
              cuda::sgd_step(h, step, 1.0f, b[0], b[1], b[2], n, c, 0);
            });
      }
    }
  }
}

TEST(GpuAdagrad, MatchesCpu) {
  DSX_REQUIRE_GPU();
  AdagradHyper h;
  h.weight_decay = 0.1f;
  compare_optimizer(
      "adagrad", {{0, 1, false}, {0, 0.1f, false}, {0, 0.01f, true}},
      [&](float* const* b, size_t n, ParamCopy c) {
        adagrad_step(h, 1.0f, b[0], b[1], b[2], n, c);
      },
      [&](float* const* b, size_t n, ParamCopy c) {
        cuda::adagrad_step(h, 1.0f, b[0], b[1], b[2], n, c, 0);
      });
}

// LAMB on the GPU and on the CPU over the same tensor table.
void check_lamb_against_cpu(const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), offsets.begin() + 1);
  size_t n = offsets.back(), tensors = sizes.size();
  FloatBuffer p(n, 0), g(n, 0), m(n, 0), v(n, 0);
  fill_normal(p, n, 0, 1, 1);
  fill_normal(g, n, 0, 0.1f, 2);
  fill_normal(m, n, 0, 0.05f, 3);
  fill_abs_normal(v, n, 0.01f, 4);
  for (size_t i = 0; i < sizes[0]; ++i) p[i] *= 100;  // tensor 0's ratio is clamped to max_coeff
  LambHyper h;
  h.weight_decay = 0.01f;
  DeviceMemory dp(n * 4), dg(n * 4), dm(n * 4), dv(n * 4), doff(offsets.size() * sizeof(size_t));
  dp.upload(p.data(), n * 4);
  dg.upload(g.data(), n * 4);
  dm.upload(m.data(), n * 4);
  dv.upload(v.data(), n * 4);
  doff.upload(offsets.data(), offsets.size() * sizeof(size_t));
  cuda::LambLayout layout{doff.get<size_t>(), offsets.data(), tensors};
  DeviceMemory work(cuda::lamb_workspace_bytes(layout)), norms(2 * tensors * sizeof(double)),
      trust(tensors * sizeof(float)), copy(n * 2);
  cuda::lamb_prepare(h, 2, 1.0f, dp.get<float>(), dg.get<float>(), dm.get<float>(), dv.get<float>(),
                     layout, norms.get<double>(), work.get(), 0);
  cuda::lamb_apply(h, 2, dp.get<float>(), dm.get<float>(), dv.get<float>(), layout,
                   norms.get<double>(), trust.get<float>(), {DType::BF16, copy.get()}, 0);
  cuda_ok(cudaDeviceSynchronize(), "lamb");
  std::vector<float> cpu_trust(tensors), gpu_trust(tensors);
  std::vector<uint16_t> gpu_copy(n);
  lamb_step(h, 2, 1.0f, p.data(), g.data(), m.data(), v.data(), offsets.data(), tensors,
            cpu_trust.data());
  trust.download(gpu_trust.data(), tensors * 4);
  copy.download(gpu_copy.data(), n * 2);
  for (size_t t = 0; t < tensors; ++t)
    EXPECT_NEAR(gpu_trust[t], cpu_trust[t], 1e-6 * cpu_trust[t]) << "tensor " << t;
  std::vector<float> gp(n), gm(n);
  dp.download(gp.data(), n * 4);
  dm.download(gm.data(), n * 4);
  EXPECT_TRUE(within_ulps(gm.data(), m.data(), n, 2, "lamb exp_avg"));
  // The trust ratio may differ in its last bit (sums in another order): allow 1e-6 of the step.
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(gp[i], p[i], 1e-6 * std::fabs(p[i]) + 1e-9) << "param " << i;
    ASSERT_EQ(gpu_copy[i], float_to_bf16(gp[i])) << "bf16 copy " << i;
  }
}

TEST(GpuLamb, MatchesCpuPerTensor) {
  DSX_REQUIRE_GPU();
  check_lamb_against_cpu({17, 1000003, 0, 4099, 1, 33});
}

// More tensors than one launch's grid.y (65535) holds: the table is walked in two launches.
TEST(GpuLamb, ManyTensorsSpanLaunches) {
  DSX_REQUIRE_GPU();
  std::vector<size_t> sizes(70001);
  for (size_t t = 0; t < sizes.size(); ++t) sizes[t] = 1 + t % 13;
  check_lamb_against_cpu(sizes);
}

TEST(GpuMixedPrecision, UnscaleCheckSumOfSquaresCastScaleReduceMatchCpu) {
  DSX_REQUIRE_GPU();
  ScopedSimdLevel scalar(SimdLevel::Scalar);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (size_t n : gpu_test_lengths()) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        std::string what = std::string(dtype_name(t)) + " n=" + std::to_string(n) +
                           " offset=" + std::to_string(offset);
        size_t es = dtype_size(t), bytes = n * es, at = offset * es;
        std::vector<uint8_t> x(bytes + 8), y(bytes + 8), got(bytes + 8);
        std::mt19937 rng(uint32_t(n + offset));
        std::normal_distribution<float> dist(0, 3);
        for (size_t i = 0; i < n; ++i) {
          store_from_float(t, x.data(), i, dist(rng));
          store_from_float(t, y.data(), i, dist(rng));
        }
        DeviceMemory dx(bytes + at + 8), dy(bytes + at + 8), flag(sizeof(int)), sum(sizeof(double)),
            work(cuda::sum_of_squares_workspace_bytes());
        dx.upload(x.data(), bytes, at);
        dy.upload(y.data(), bytes, at);
        // sum of squares: float64 both sides in different orders: within n roundings (or 1e-12).
        cuda::sum_of_squares(t, dx.get(at), n, sum.get<double>(), work.get(), 0);
        double gpu_sum = 0;
        sum.download(&gpu_sum, sizeof(double));
        double cpu_sum = sum_of_squares(t, x.data(), n);
        EXPECT_NEAR(gpu_sum, cpu_sum, std::max(1e-12, double(n) * 0x1p-53) * cpu_sum) << what;
        // unscale_and_check: bitwise equal values, no flag; then one Inf raises it.
        int zero = 0, found = 0;
        flag.upload(&zero, sizeof(int));
        cuda::unscale_and_check(t, dx.get(at), 0.25f, n, flag.get<int>(), 0);
        bool cpu_found = unscale_and_check(t, x.data(), 0.25f, n);
        dx.download(got.data(), bytes, at);
        flag.download(&found, sizeof(int));
        EXPECT_EQ(found != 0, cpu_found) << what;
        EXPECT_EQ(std::memcmp(got.data(), x.data(), bytes), 0) << what << " unscale";
        if (n) {
          std::vector<uint8_t> inf(es);
          store_from_float(t, inf.data(), 0, INFINITY);
          dx.upload(inf.data(), es, at + (n - 1) * es);
          cuda::has_inf_or_nan(t, dx.get(at), n, flag.get<int>(), 0);
          flag.download(&found, sizeof(int));
          EXPECT_EQ(found, 1) << what << " Inf in the last element";
          dx.upload(x.data(), bytes, at);
        }
        // reduce_into (each op) and scale: bitwise equal to the CPU.
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
          std::vector<uint8_t> cpu = x;
          reduce_into(t, op, cpu.data(), y.data(), n);
          dx.upload(x.data(), bytes, at);
          cuda::reduce_into(t, op, dx.get(at), dy.get(at), n, 0);
          dx.download(got.data(), bytes, at);
          EXPECT_EQ(std::memcmp(got.data(), cpu.data(), bytes), 0)
              << what << " reduce " << reduce_op_name(op);
        }
        std::vector<uint8_t> cpu = x;
        scale(t, cpu.data(), 3.0f, n);
        dx.upload(x.data(), bytes, at);
        cuda::scale(t, dx.get(at), 3.0f, n, 0);
        dx.download(got.data(), bytes, at);
        EXPECT_EQ(std::memcmp(got.data(), cpu.data(), bytes), 0) << what << " scale";
        // cast to every dtype.
        for (DType to : {DType::F32, DType::F16, DType::BF16}) {
          size_t to_bytes = n * dtype_size(to), to_at = offset * dtype_size(to);
          std::vector<uint8_t> want(to_bytes + 8), out(to_bytes + 8);
          cast(t, x.data(), to, want.data(), n);
          DeviceMemory dz(to_bytes + to_at + 8);
          dx.upload(x.data(), bytes, at);
          cuda::cast(t, dx.get(at), to, dz.get(to_at), n, 0);
          dz.download(out.data(), to_bytes, to_at);
          EXPECT_EQ(std::memcmp(out.data(), want.data(), to_bytes), 0)
              << what << " cast to " << dtype_name(to);
        }
        cuda_ok(cudaDeviceSynchronize(), what.c_str());
      }
    }
  }
}

// The rows grouped by token on the GPU (kernels/cuda/batch_tokens.h) are the CPU's groups,
// behind their number: a token repeated across shared-memory tiles, one token only, all
// distinct, one row, and a batch past one tile and one block.
TEST(GpuBatchTokens, GroupsRowsByTokenAsTheCpuDoes) {
  DSX_REQUIRE_GPU();
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> cases = {{5, 3, 5, 0, 3, 5, 7}, std::vector<int32_t>(300, 4), {9}, {}};
  cases.back().resize(257);
  std::iota(cases.back().rbegin(), cases.back().rend(), 0);  // all distinct, descending
  std::vector<int32_t> mixed(700);
  for (auto& t : mixed) t = static_cast<int32_t>(rng() % 50);
  cases.push_back(mixed);
  for (const auto& tokens : cases) {
    const size_t n = tokens.size();
    const TokenRows cpu = group_rows_by_token(tokens.data(), n, 1000);
    DeviceMemory in(n * 4), grouped(cuda::grouped_rows_capacity(n) * 4), scratch(cuda::grouped_rows_scratch(n) * 4);
    in.upload(tokens.data(), n * 4);
    cuda::group_rows_by_token(grouped.get<int32_t>(), scratch.get<int32_t>(), in.get<int32_t>(), n, nullptr);
    std::vector<int32_t> gpu(cuda::grouped_rows_capacity(n));
    grouped.download(gpu.data(), gpu.size() * 4);
    ASSERT_EQ(gpu[0], cpu.distinct) << "n " << n;
    EXPECT_EQ(std::vector<int32_t>(gpu.begin() + 1, gpu.begin() + 1 + cpu.packed.size()), cpu.packed) << "n " << n;
  }
}

// An embedding table's gradient over rows grouped on the GPU: each token's rows added in row
// order in fp32 onto what the table held (the bits of that sum on the host), near the float64
// sum; tokens absent from the batch keep their rows.
TEST(GpuBatchTokens, EmbeddingBackwardGroupedSumsEachTokensRowsInRowOrder) {
  DSX_REQUIRE_GPU();
  const int C = 40, vocab = 30;
  const size_t n = 300;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 20);  // tokens 20..29 absent
  std::vector<float> dout(n * C), table(size_t(vocab) * C);
  for (auto& v : dout) v = value(rng);
  for (auto& v : table) v = value(rng);
  std::vector<float> expected = table;
  std::vector<double> exact(table.begin(), table.end());
  for (int32_t tok = 0; tok < vocab; ++tok)
    for (int c = 0; c < C; ++c) {
      float sum = 0.0f;
      for (size_t r = 0; r < n; ++r)
        if (tokens[r] == tok) sum += dout[r * C + c], exact[size_t(tok) * C + c] += dout[r * C + c];
      if (sum != 0.0f) expected[size_t(tok) * C + c] += sum;
    }
  DeviceMemory in(n * 4), grouped(cuda::grouped_rows_capacity(n) * 4), scratch(cuda::grouped_rows_scratch(n) * 4);
  DeviceMemory d_out(dout.size() * 4), d_table(table.size() * 4);
  in.upload(tokens.data(), n * 4);
  d_out.upload(dout.data(), dout.size() * 4);
  d_table.upload(table.data(), table.size() * 4);
  cuda::group_rows_by_token(grouped.get<int32_t>(), scratch.get<int32_t>(), in.get<int32_t>(), n, nullptr);
  cuda::embedding_backward_grouped(d_table.get<float>(), d_out.get<float>(), grouped.get<int32_t>(), n, C, nullptr);
  std::vector<float> got(table.size());
  d_table.download(got.data(), got.size() * 4);
  EXPECT_EQ(got, expected);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], exact[i], 1e-5) << "element " << i;
}

// The mean loss and the count of the targets that count, on the GPU, are the CPU's to the bit.
TEST(GpuBatchTokens, MeanLossOverTheCountedTargetsMatchesCpu) {
  DSX_REQUIRE_GPU();
  for (size_t n : {size_t(1), size_t(37), size_t(1000)}) {
    std::vector<float> losses(n);
    std::vector<int32_t> targets(n);
    for (size_t i = 0; i < n; ++i) {
      targets[i] = n == 1 || i % 3 == 1 ? -1 : static_cast<int32_t>(i % 11);
      losses[i] = targets[i] < 0 ? 0.0f : 1.0f + 0.37f * static_cast<float>(i % 13);
    }
    const size_t counted = static_cast<size_t>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
    DeviceMemory l(n * 4), t(n * 4), out(8);
    l.upload(losses.data(), n * 4);
    t.upload(targets.data(), n * 4);
    cuda::decoder_mean_loss(out.get<float>(), out.get<int32_t>(4), l.get<float>(), t.get<int32_t>(), n, nullptr);
    float loss = 0;
    int32_t gpu_counted = 0;
    out.download(&loss, 4);
    out.download(&gpu_counted, 4, 4);
    EXPECT_EQ(gpu_counted, static_cast<int32_t>(counted)) << "n " << n;
    EXPECT_EQ(loss, cpu::decoder_mean_loss(losses.data(), n, counted)) << "n " << n;  // n 1: none counts, 0
  }
}

}  // namespace
}  // namespace dsx::kernels::test
