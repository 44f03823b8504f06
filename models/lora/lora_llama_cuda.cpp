// LoraLlamaCuda (see lora_llama_cuda.h): the base weights frozen in device memory, the adapters
// beside LlamaCuda's projections.
#include "models/lora/lora_llama_cuda.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "device/cuda_device.h"
#include "device/owned_memory.h"
#include "dsx/error.h"
#include "models/lora/device_frozen_weights.h"
#include "models/lora/frozen_with_adapters.h"
#include "models/lora/lora_llama.h"

namespace dsx::models {

namespace {

constexpr std::chrono::milliseconds kStreamWait{std::chrono::minutes(10)};

}  // namespace

template <class T>
LoraLlamaCuda<T>::LoraLlamaCuda(const LlamaConfig& config, const LoraConfig& lora, int max_batch,
                                int max_seq, bool activation_checkpointing,
                                const std::vector<float>& base, cudaStream_t stream,
                                std::unique_ptr<ParamAccess> frozen)
    : LoraLlamaCuda(
          config, lora, max_batch, max_seq, activation_checkpointing, base,
          [this, &base, &frozen](device::Device& gpu, cudaStream_t) -> std::unique_ptr<ParamAccess> {
            if (frozen) return std::move(frozen);
            return std::make_unique<DeviceFrozenWeights<T>>(gpu, base_.params(), base);
          },
          stream) {}

template <class T>
LoraLlamaCuda<T>::LoraLlamaCuda(const LlamaConfig& config, const LoraConfig& lora, int max_batch,
                                int max_seq, bool activation_checkpointing,
                                const std::vector<float>& base, const FrozenOnGpu& make_frozen,
                                cudaStream_t stream)
    : base_(config, max_batch, max_seq, activation_checkpointing, stream),
      gpu_(device::make_cuda_device()),
      stream_view_(gpu_->adopt_stream(base_.stream(), "LoRA model")),
      layout_(config, lora, /*max_batch=*/0,
              /*max_seq=*/0),  // the layout only: the branches run here
      trained_(lora_llama_trained_base(config, layout_)),
      list_(lora_param_list(layout_.specs(), trained_, base_.params().size())),
      trained_initial_(trained_initial_values(trained_, base_.params(), base)),
      frozen_(make_frozen(*gpu_, base_.stream())),
      adapters_(layout_, *gpu_, base_.stream(), max_batch, max_seq) {
  base_.set_adapters(&adapters_);
  if (auto* quantized = dynamic_cast<DeviceQuantizedProjections<T>*>(frozen_.get()))
    base_.set_quantized_base(quantized);
}

template <class T>
LoraLlamaCuda<T>::~LoraLlamaCuda() {
  try {
    stream_view_->synchronize(kStreamWait);
  } catch (const Error&) {
    // A failed stream: the buffers are given back regardless; nothing else can be done here.
  }
}

template <class T>
void LoraLlamaCuda<T>::init_adapters(float* flat, uint64_t seed) const {
  layout_.init(flat, seed);
  std::copy(trained_initial_.begin(), trained_initial_.end(), flat + layout_.numel());
}

template <class T>
void LoraLlamaCuda<T>::init_params(void* flat, uint64_t seed) const {
  std::vector<float> w(list_.numel);
  init_adapters(w.data(), seed);
  constexpr kernels::DType dtype = storage_dtype<T>();
  for (size_t i = 0; i < w.size(); ++i) kernels::store_element<dtype>(flat, i, w[i]);
}

template <class T>
float LoraLlamaCuda<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int T_,
                                ParamAccess& access) {
  adapters_.bind(&access, nullptr, targets != nullptr);
  FrozenWithAdapters both(*frozen_, access, list_.trained_of_base);
  return base_.forward(inputs, targets, B, T_, both);
}

template <class T>
void LoraLlamaCuda<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  adapters_.bind(&access, &sink, true);
  FrozenWithAdapters both(*frozen_, access, list_.trained_of_base);
  NoFrozenGrads frozen_sink(sink, list_.trained_of_base);
  base_.backward(both, frozen_sink, grad_scale);
}

template <class T>
double LoraLlamaCuda<T>::forward_flops(int64_t B, int64_t T_) const {
  return base_.forward_flops(B, T_) + layout_.flops(B * T_);
}

template class LoraLlamaCuda<float>;
template class LoraLlamaCuda<__nv_bfloat16>;
template class LoraLlamaCuda<__half>;

}  // namespace dsx::models
