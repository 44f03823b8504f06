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
#include "kernels/token_rows.h"
#include "models/gpt2/block_tensors.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/cuda_stream.h"
#include "models/cuda_workspaces.h"
#include "models/decoder_model.h"
#include "models/model.h"

namespace dsx::models {

// A device allocation of n elements of T, freed on destruction.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n);
  ~DeviceArray();
  DeviceArray(DeviceArray&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Host fp32 <-> device T (bf16 rounds to nearest even), on `stream`, waited for.
template <class T>
void upload_as(T* device, const float* host, size_t n, cudaStream_t stream);
template <class T>
void download_as(float* host, const T* device, size_t n, cudaStream_t stream);

// The engine's name of a storage type.
template <class T>
constexpr kernels::DType storage_dtype() {
  if constexpr (std::is_same_v<T, float>) return kernels::DType::F32;
  if constexpr (std::is_same_v<T, __half>) return kernels::DType::F16;
  return kernels::DType::BF16;
}

// A CUDA model's init_params: `reference` (its CPU fp32 twin) initialises, and the values are
// written to the host buffer `flat` in T's storage format (round to nearest even), so both start
// from the same weights for the same seed.
template <class T>
void init_params_as(const Model& reference, void* flat, uint64_t seed);

// The mean of the rows' losses (on the device, one per row) over the targets that count
// (host_targets >= 0), summed on the host in a fixed order so the reported loss is reproducible;
// `counted` gets how many counted. Waits for the stream.
float host_mean_loss(const float* device_losses, const int32_t* host_targets, size_t rows, cudaStream_t stream,
                     size_t& counted);

// The mean loss left on the device (Model::keep_loss_on_device): *out = the rows' losses summed
// on the stream, times 1 / counted, where `counted` (rows with host_targets >= 0) comes from the
// host's targets. Enqueues only: never waits.
void device_mean_loss(float* out, const float* device_losses, const int32_t* host_targets, size_t rows,
                      cudaStream_t stream, size_t& counted);

// Where a CUDA model keeps its loss when asked to (Model::keep_loss_on_device).
class KeptLoss {
 public:
  KeptLoss() : value_(1) {}
  bool keep(bool on) {
    kept_ = on;
    return true;
  }
  bool kept() const { return kept_; }
  float* data() const { return value_.data(); }

 private:
  bool kept_ = false;
  DeviceArray<float> value_;
};

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
  bool keep_loss_on_device(bool keep) override { return loss_.keep(keep); }
  const float* device_loss() const override { return loss_.data(); }
  std::vector<float> logits() const override;
  size_t activation_bytes() const override;  // device bytes
  cudaStream_t stream() const { return stream_.get(); }
  // The cuBLASLt state: the benchmark reads how many matmul plans were built.
  const kernels::cuda::DecoderBlas& blas() const { return blas_; }

 private:
  struct BlockActs {
    DeviceArray<T> ln1, qkv, atty, res2, ln2, fch, fch_gelu;
    DeviceArray<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, att;
  };
  using BlockParams = GPT2BlockTensors<const T*>;
  using BlockGrads = GPT2BlockTensors<T*>;
  BlockActs& acts_of(int block) { return checkpointing_ ? blocks_[0] : blocks_[block]; }
  void block_forward(BlockActs& a, T* res_out, const T* res_in, const BlockParams& p);
  void block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p, const BlockGrads& g);

  // Owners that exist before anything else CUDA in the model: the rank's GPU made current, then
  // the stream (a failure after either frees what was made; a destructor alone would not run).

  RankDevice device_;  // before every CUDA member
  ModelStream stream_;
  device::OwnedMemory blas_workspace_;  // before blas_, which works in it
  kernels::cuda::DecoderBlas blas_;
  std::vector<int32_t> host_inputs_;  // this batch's tokens: grouped by token for the embedding backward
  kernels::TokenRows token_rows_host_;

  DeviceArray<int32_t> inputs_, targets_, token_rows_;
  std::vector<DeviceArray<T>> residual_;
  std::vector<BlockActs> blocks_;
  DeviceArray<T> lnf_, logits_, tmp_, dres_, dln_, dqkv_, datty_, dfch_;
  DeviceArray<float> lnf_mean_, lnf_rstd_, lse_, losses_, dpre_, ln_scratch_;
  KeptLoss loss_;
};

extern template class GPT2Cuda<float>;
extern template class GPT2Cuda<__nv_bfloat16>;
extern template class GPT2Cuda<__half>;

}  // namespace dsx::models
