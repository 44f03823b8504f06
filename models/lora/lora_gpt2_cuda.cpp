// LoraGpt2Cuda (see lora_gpt2_cuda.h): the base weights frozen in device memory, the adapters
// beside GPT2Cuda's projections.
#include "models/lora/lora_gpt2_cuda.h"

#include <chrono>

#include "device/cuda_device.h"
#include "dsx/error.h"
#include "models/lora/device_frozen_weights.h"
#include "models/lora/frozen_with_adapters.h"

namespace dsx::models {

namespace {

constexpr std::chrono::milliseconds kStreamWait{std::chrono::minutes(10)};

}  // namespace

template <class T>
LoraGpt2Cuda<T>::LoraGpt2Cuda(const GPT2Config& config, const LoraConfig& lora, int max_batch,
                              int max_seq, bool activation_checkpointing,
                              const std::vector<float>& base, cudaStream_t stream)
    : base_(config, max_batch, max_seq, activation_checkpointing, stream),
      gpu_(device::make_cuda_device()),
      stream_view_(gpu_->adopt_stream(base_.stream(), "LoRA model")),
      layout_(config, lora, /*max_batch=*/0,
              /*max_seq=*/0),  // the layout only: the branches run here
      frozen_(std::make_unique<DeviceFrozenWeights<T>>(*gpu_, base_.params(), base)),
      adapters_(layout_, *gpu_, base_.stream(), max_batch, max_seq) {
  base_.set_adapters(&adapters_);
}

template <class T>
LoraGpt2Cuda<T>::~LoraGpt2Cuda() {
  try {
    stream_view_->synchronize(kStreamWait);
  } catch (const Error&) {
    // A failed stream: the buffers are given back regardless; nothing else can be done here.
  }
}

template <class T>
void LoraGpt2Cuda<T>::init_params(void* flat, uint64_t seed) const {
  std::vector<float> w(layout_.numel());
  layout_.init(w.data(), seed);
  constexpr kernels::DType dtype = storage_dtype<T>();
  for (size_t i = 0; i < w.size(); ++i) kernels::store_element<dtype>(flat, i, w[i]);
}

template <class T>
float LoraGpt2Cuda<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int T_,
                               ParamAccess& access) {
  adapters_.bind(&access, nullptr, targets != nullptr);
  FrozenWithAdapters both(*frozen_, access);
  return base_.forward(inputs, targets, B, T_, both);
}

// NoFrozenGrads: every base tensor's gradient is null, so GPT2Cuda skips its weight products.
template <class T>
void LoraGpt2Cuda<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  adapters_.bind(&access, &sink, true);
  FrozenWithAdapters both(*frozen_, access);
  NoFrozenGrads frozen_sink(sink);
  base_.backward(both, frozen_sink, grad_scale);
}

template <class T>
double LoraGpt2Cuda<T>::forward_flops(int64_t B, int64_t T_) const {
  return base_.forward_flops(B, T_) + layout_.flops(B * T_);
}

template class LoraGpt2Cuda<float>;
template class LoraGpt2Cuda<__nv_bfloat16>;
template class LoraGpt2Cuda<__half>;

}  // namespace dsx::models
