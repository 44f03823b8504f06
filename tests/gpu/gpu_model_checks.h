// For the GPU model tests (GPT2Cuda, LlamaCuda): parameters and gradients in device memory, and
// the checks both families pass the same way: the GPU model against the CPU model on the same
// weights and batch, and gradients that are the same bits run after run.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "device/cuda_device.h"
#include "models/device_buffer.h"
#include "models/gpt2/gpt2_cuda.h"  // bits_of, download_as
#include "models/local_params.h"
#include "models/model.h"
#include "tests/models/random_model.h"
#include "trace/recorder.h"

namespace dsx::test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Parameters and gradients in device memory (DeviceBuffer on the GPU's device::Device),
// everything always resident. `device_ordered`: the sink orders after the model's device work
// (GradSink::orders_after_device_work). Reads and writes wait: the caller has waited for the
// model's stream before reading gradients.
template <class T>
class DeviceParams final : public models::ParamAccess, public models::GradSink {
 public:
  explicit DeviceParams(const models::Model& m, bool device_ordered = false)
      : gpu_(device::make_cuda_device()),
        specs_(m.params()),
        params_(*gpu_, m.num_params()),
        grads_(*gpu_, m.num_params()),  // zero-filled
        device_ordered_(device_ordered) {}
  // Host fp32 values stored as T (16-bit: rounded to nearest even).
  void upload(const float* host) {
    if constexpr (sizeof(T) == 4) {
      gpu_->copy_now(params_.data(), host, params_.bytes());
    } else {
      std::vector<uint16_t> bits(params_.size());
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = models::bits_of<T>(host[i]);
      gpu_->copy_now(params_.data(), bits.data(), params_.bytes());
    }
  }
  std::vector<float> grads() const {
    std::vector<float> g(grads_.size());
    models::download_as(*gpu_, g.data(), grads_.data(), g.size());
    return g;
  }
  // Waited for: the model's streams must not find it half-zeroed.
  void zero_grads() {
    gpu_->fill_zero(grads_.data(), grads_.bytes(), gpu_->compute_stream());
    gpu_->compute_stream().synchronize(std::chrono::minutes(1));
  }
  std::vector<unsigned char> grad_bits() const {
    std::vector<unsigned char> bits(grads_.bytes());
    gpu_->copy_now(bits.data(), grads_.data(), bits.size());
    return bits;
  }
  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t i) override { return params_.data() + specs_[i].offset; }
  void* grad(size_t i) override { return grads_.data() + specs_[i].offset; }
  void ready(int) override {}
  bool orders_after_device_work() const override { return device_ordered_; }

 private:
  std::unique_ptr<device::Device> gpu_;  // before the buffers, which it frees
  std::vector<models::ParamSpec> specs_;
  models::DeviceBuffer<T> params_, grads_;
  bool device_ordered_;
};

// The names of the recorded spans on a GPU's model track ("cuda:<n> model"), each checked to be
// a "gpu layer" span that does not end before it begins.
inline std::multiset<std::string> gpu_layer_span_names() {
  const auto& recorder = trace::Recorder::instance();
  std::set<int> gpu_tracks;
  for (const auto& t : recorder.tracks())
    if (t.name.rfind("cuda:", 0) == 0 && t.name.size() > 6 && t.name.substr(t.name.size() - 6) == " model")
      gpu_tracks.insert(t.id);
  std::multiset<std::string> names;
  for (const auto& e : recorder.events())
    if (gpu_tracks.count(e.track)) {
      EXPECT_STREQ(e.category, "gpu layer");
      EXPECT_LE(e.begin_ns, e.end_ns) << e.name;
      names.insert(e.name);
    }
  return names;
}

// max |a - b| over max |b|: the error relative to the reference tensor's largest magnitude.
inline double rel_diff(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// The GPU model against the CPU model, both on the same weights already, on inputs x and targets y
// of B rows of Tn: logits (a forward without targets), loss and every parameter's gradient within
// `tol` (relative, rel_diff).
template <class T>
void expect_gpu_matches_cpu(models::Model& cpu, models::LocalParams<float>& host, models::Model& gpu,
                            DeviceParams<T>& dev, const std::vector<int32_t>& x,
                            const std::vector<int32_t>& y, int B, int Tn, double tol) {
  cpu.forward(x.data(), nullptr, B, Tn, host);
  gpu.forward(x.data(), nullptr, B, Tn, dev);
  const auto zc = cpu.logits(), zg = gpu.logits();
  ASSERT_EQ(zc.size(), zg.size());
  EXPECT_LT(rel_diff(zg.data(), zc.data(), zc.size()), tol) << "logits";
  const float lc = cpu.forward(x.data(), y.data(), B, Tn, host);
  const float lg = gpu.forward(x.data(), y.data(), B, Tn, dev);
  EXPECT_LT(std::abs(lg - lc) / lc, tol) << "loss " << lg << " vs " << lc;
  host.zero_grads();
  cpu.backward(host, host, 1.0f);
  gpu.backward(dev, dev, 1.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the model's stream, or one it was given
  const auto gg = dev.grads();
  for (const auto& s : cpu.params())
    EXPECT_LT(rel_diff(gg.data() + s.offset, host.grads() + s.offset, s.numel), tol) << s.name;
}

// `steps` plain SGD steps (lr) on both devices from the weights already in `host` (the CPU's
// parameters, fp32 models), a new random batch each: every step's loss within `loss_tol` of the
// CPU's (relative), and the weights at the end within `weights_tol` (rel_diff).
inline void expect_sgd_steps_match(models::Model& cpu, models::LocalParams<float>& host,
                                   models::Model& gpu, DeviceParams<float>& dev, int vocab, int B,
                                   int Tn, int steps, float lr, double loss_tol,
                                   double weights_tol) {
  std::vector<float> w(host.params(), host.params() + host.size());
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto x = random_tokens(B * Tn, vocab, 20 + step),
               y = random_tokens(B * Tn, vocab, 40 + step);
    dev.upload(w.data());
    dev.zero_grads();
    host.zero_grads();
    const float lc = cpu.forward(x.data(), y.data(), B, Tn, host);
    const float lg = gpu.forward(x.data(), y.data(), B, Tn, dev);
    EXPECT_NEAR(lg, lc, loss_tol * lc);
    cpu.backward(host, host, 1.0f);
    gpu.backward(dev, dev, 1.0f);
    const auto g = dev.grads();
    for (size_t i = 0; i < w.size(); ++i) {
      host.params()[i] -= lr * host.grads()[i];
      w[i] -= lr * g[i];
    }
  }
  EXPECT_LT(rel_diff(w.data(), host.params(), w.size()), weights_tol);
}

// Three backward passes over the same weights and batch from zeroed gradients: runs 1 and 2 must
// give run 0's gradient bytes (sums over rows and heads in the same order every time, no atomics).
template <class T>
void expect_bitwise_reproducible_gradients(models::Model& gpu, DeviceParams<T>& dev,
                                           const std::vector<int32_t>& x,
                                           const std::vector<int32_t>& y, int B, int Tn) {
  std::vector<unsigned char> first;
  for (int run = 0; run < 3; ++run) {
    dev.zero_grads();
    gpu.forward(x.data(), y.data(), B, Tn, dev);
    gpu.backward(dev, dev, 1.0f);
    auto bits = dev.grad_bits();
    if (run == 0) {
      first = bits;
      continue;
    }
    ASSERT_EQ(bits.size(), first.size());
    size_t differ = 0;
    for (size_t i = 0; i < bits.size(); ++i) differ += bits[i] != first[i];
    EXPECT_EQ(differ, 0u) << "run " << run << ": " << differ << " gradient bytes differ from run 0";
  }
}

}  // namespace dsx::test
