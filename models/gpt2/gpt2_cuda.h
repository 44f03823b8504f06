// GPT-2 on one GPU: the same model, layer protocol and activation checkpointing as GPT2Cpu, with
// the CUDA layers of kernels/cuda/decoder_layers.h on one stream. T is the storage type of
// parameters, activations and gradients (float, __nv_bfloat16 or __half), arithmetic is fp32.
// ParamAccess/GradSink hand out device pointers. Built only with CUDA (DSX_HAVE_CUDA).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/decoder_layers.h"
#include "kernels/dtype.h"
#include "models/cuda_stream.h"
#include "models/cuda_workspaces.h"
#include "models/decoder_model.h"
#include "models/device_buffer.h"
#include "models/gpt2/block_tensors.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

// The engine's name of a storage type.
template <class T>
constexpr kernels::DType storage_dtype() {
  if constexpr (std::is_same_v<T, float>) return kernels::DType::F32;
  if constexpr (std::is_same_v<T, __half>) return kernels::DType::F16;
  return kernels::DType::BF16;
}

// One host value in a 16-bit storage format's bits (round to nearest even), and back.
template <class T>
uint16_t bits_of(float v) {
  return storage_dtype<T>() == kernels::DType::F16 ? kernels::float_to_fp16(v) : kernels::float_to_bf16(v);
}
template <class T>
float value_of(uint16_t bits) {
  return storage_dtype<T>() == kernels::DType::F16 ? kernels::fp16_to_float(bits) : kernels::bf16_to_float(bits);
}

// Device T -> host fp32 through `gpu` (copy_now: the caller has waited for the streams that
// wrote it).
template <class T>
void download_as(device::Device& gpu, float* host, const T* data, size_t n);

// A CUDA model's init_params: `reference` (its CPU fp32 twin) initialises, and the values are
// written to the host buffer `flat` in T's storage format (round to nearest even), so both start
// from the same weights for the same seed.
template <class T>
void init_params_as(const Model& reference, void* flat, uint64_t seed);

template <class T>
class GPT2Cuda final : public DecoderModel<GPT2Config, gpt2_forward_flops> {
 public:
  // `stream`: where the model enqueues its work - the compute stream of the device ZeRO keeps
  // its state on, so that ZeRO's events order the two; null: a stream of the model's own.
  GPT2Cuda(const GPT2Config& config, int max_batch, int max_seq, bool activation_checkpointing = false,
           cudaStream_t stream = nullptr);
  ~GPT2Cuda() override;

  kernels::DType param_dtype() const override { return storage_dtype<T>(); }
  bool on_device() const override { return true; }
  // Writes fp32 values when T is float, bf16 bit patterns when T is bf16 (host memory).
  void init_params(void* flat, uint64_t seed) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int Tn, ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  bool keep_loss_on_device(bool keep) override {
    keep_loss_ = keep;
    return true;
  }
  const float* device_loss() const override { return loss_.data(); }
  std::vector<float> logits() const override;
  size_t activation_bytes() const override;  // device bytes
  cudaStream_t stream() const { return stream_.get(); }
  // The cuBLASLt state: the benchmark reads how many matmul plans were built.
  const kernels::cuda::DecoderBlas& blas() const { return blas_; }
  // Extra paths beside the projections (LoRA, models/lora/lora_gpt2_cuda.h), on this stream;
  // null: none. A null gradient for a weight then skips its products (a frozen base).
  void set_adapters(DeviceGpt2ProjectionAdapters<T>* adapters) { adapters_ = adapters; }

 private:
  struct BlockActs {
    DeviceBuffer<T> ln1, qkv, atty, res2, ln2, fch, fch_gelu;
    DeviceBuffer<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, att;
  };
  using BlockParams = GPT2BlockTensors<const T*>;
  using BlockGrads = GPT2BlockTensors<T*>;
  BlockActs& acts_of(int block) { return checkpointing_ ? blocks_[0] : blocks_[block]; }
  void allocate_activations();
  void block_forward(BlockActs& a, T* res_out, const T* res_in, const BlockParams& p);
  void block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p, const BlockGrads& g);
  void embedding_backward(GradSink& sink);
  // The adapters' share of projection p of block block_ (nothing without adapters).
  void adapt_forward(Gpt2Projection p, T* out, const T* inp);
  void adapt_backward(Gpt2Projection p, T* dinp, const T* dout, const T* inp);

  // Owners that exist before anything else CUDA in the model: the rank's GPU made current, then
  // its device and stream (a failure after either frees what was made; a destructor alone would
  // not run). Every buffer below comes from that device and goes before it.

  RankDevice device_;  // before every CUDA member
  ModelStream stream_;
  device::OwnedMemory blas_workspace_;  // before blas_, which works in it
  kernels::cuda::DecoderBlas blas_;
  bool keep_loss_ = false;  // Model::keep_loss_on_device

  // The batch's tokens, their rows grouped by token (for the embedding backward) and the count
  // of targets that count, all made on the GPU from the tokens copied up.
  DeviceBuffer<int32_t> inputs_, targets_, grouped_rows_, group_scratch_, counted_on_device_;
  std::vector<DeviceBuffer<T>> residual_;
  std::vector<BlockActs> blocks_;
  DeviceBuffer<T> lnf_, logits_, tmp_, dres_, dln_, dqkv_, datty_, dfch_;
  DeviceBuffer<float> lnf_mean_, lnf_rstd_, lse_, losses_, dpre_, ln_scratch_, loss_;
  DeviceGpt2ProjectionAdapters<T>* adapters_ = nullptr;
  int block_ = 0;  // the block being run, for the adapters
};

extern template class GPT2Cuda<float>;
extern template class GPT2Cuda<__nv_bfloat16>;
extern template class GPT2Cuda<__half>;

}  // namespace dsx::models
