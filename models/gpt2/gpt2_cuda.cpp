// GPT-2 forward and backward on one GPU (see gpt2_cuda.h). The layer sequence is GPT2Cpu's.
#include "models/gpt2/gpt2_cuda.h"

#include <cstring>
#include <limits>
#include <string>

#include "dsx/error.h"
#include "kernels/column_sums.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/token_rows.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/gpt2/gpu_layer_span.h"
#include "models/token_batch.h"

namespace dsx::models {

namespace kc = dsx::kernels::cuda;

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::Internal, std::string("GPT-2 CUDA: ") + what + ": " + cudaGetErrorString(e) +
                                         "; check that a GPU is visible and has enough free memory");
}

}  // namespace

template <class T>
DeviceArray<T>::DeviceArray(size_t n) : size_(n) {
  if (n) cuda_check(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)), "cudaMalloc");
}

template <class T>
DeviceArray<T>::~DeviceArray() {
  if (data_) cudaFree(data_);
}

template <class T>
DeviceArray<T>& DeviceArray<T>::operator=(DeviceArray&& o) noexcept {
  if (this != &o) {
    if (data_) cudaFree(data_);
    data_ = o.data_, size_ = o.size_;
    o.data_ = nullptr, o.size_ = 0;
  }
  return *this;
}

// One host value in the storage format's bits (round to nearest even).
template <class T>
uint16_t bits_of(float v) {
  return storage_dtype<T>() == kernels::DType::F16 ? kernels::float_to_fp16(v) : kernels::float_to_bf16(v);
}

template <class T>
float value_of(uint16_t bits) {
  return storage_dtype<T>() == kernels::DType::F16 ? kernels::fp16_to_float(bits) : kernels::bf16_to_float(bits);
}

// Copies on `stream` and waits for it: a cudaMemcpy on the legacy stream may return before its
// data lands, and the model's non-blocking streams would not wait for it.
template <class T>
void upload_as(T* device, const float* host, size_t n, cudaStream_t stream) {
  std::vector<uint16_t> bits;
  const void* src = host;
  if constexpr (sizeof(T) != 4) {
    bits.resize(n);
    for (size_t i = 0; i < n; ++i) bits[i] = bits_of<T>(host[i]);
    src = bits.data();
  }
  cuda_check(cudaMemcpyAsync(device, src, n * sizeof(T), cudaMemcpyHostToDevice, stream), "upload");
  cuda_check(cudaStreamSynchronize(stream), "upload");
}

template <class T>
void download_as(float* host, const T* device, size_t n, cudaStream_t stream) {
  if constexpr (sizeof(T) == 4) {
    cuda_check(cudaMemcpyAsync(host, device, n * 4, cudaMemcpyDeviceToHost, stream), "download");
    cuda_check(cudaStreamSynchronize(stream), "download");
  } else {
    std::vector<uint16_t> bits(n);
    cuda_check(cudaMemcpyAsync(bits.data(), device, n * 2, cudaMemcpyDeviceToHost, stream), "download");
    cuda_check(cudaStreamSynchronize(stream), "download");
    for (size_t i = 0; i < n; ++i) host[i] = value_of<T>(bits[i]);
  }
}

template <class T>
GPT2Cuda<T>::GPT2Cuda(const GPT2Config& config, int max_batch, int max_seq, bool activation_checkpointing,
                      cudaStream_t stream)
    // Checked before anything CUDA is made, so a bad config costs no GPU.
    : DecoderModel(config, gpt2_param_specs(checked_for_build(config, max_batch, max_seq)), max_batch, max_seq,
                   activation_checkpointing),
      stream_(stream),
      blas_workspace_(decoder_blas_workspace(stream_.device(), 4 * size_t(config.channels))),  // fc's bias
      blas_(workspace_of(blas_workspace_)) {
  const size_t L = config.num_layers, C = config.channels, NH = config.num_heads;
  const size_t N = size_t(max_batch) * max_seq, att = size_t(max_batch) * NH * max_seq * max_seq;
  for (size_t l = 0; l <= L; ++l) residual_.emplace_back(N * C);
  blocks_.resize(checkpointing_ ? 1 : L);
  for (auto& a : blocks_) {
    a.ln1 = DeviceArray<T>(N * C), a.qkv = DeviceArray<T>(N * 3 * C), a.atty = DeviceArray<T>(N * C);
    a.res2 = DeviceArray<T>(N * C), a.ln2 = DeviceArray<T>(N * C), a.fch = DeviceArray<T>(N * 4 * C);
    a.fch_gelu = DeviceArray<T>(N * 4 * C), a.att = DeviceArray<float>(att);
    a.ln1_mean = DeviceArray<float>(N), a.ln1_rstd = DeviceArray<float>(N);
    a.ln2_mean = DeviceArray<float>(N), a.ln2_rstd = DeviceArray<float>(N);
  }
  inputs_ = DeviceArray<int32_t>(N), targets_ = DeviceArray<int32_t>(N);
  token_rows_ = DeviceArray<int32_t>(kernels::token_rows_capacity(N));
  lnf_ = DeviceArray<T>(N * C), logits_ = DeviceArray<T>(N * config.padded_vocab_size);
  tmp_ = DeviceArray<T>(N * C), dres_ = DeviceArray<T>(N * C), dln_ = DeviceArray<T>(N * C);
  dqkv_ = DeviceArray<T>(N * 3 * C), datty_ = DeviceArray<T>(N * C), dfch_ = DeviceArray<T>(N * 4 * C);
  lnf_mean_ = DeviceArray<float>(N), lnf_rstd_ = DeviceArray<float>(N), lse_ = DeviceArray<float>(N);
  losses_ = DeviceArray<float>(N), dpre_ = DeviceArray<float>(att);
  ln_scratch_ = DeviceArray<float>(kernels::column_sums_scratch_floats(N, C));
}

template <class T>
GPT2Cuda<T>::~GPT2Cuda() {
  kc::use_chosen_device();  // the members' owners free on this thread
}

template <class T>
size_t GPT2Cuda<T>::activation_bytes() const {
  size_t bytes = 0;
  auto add = [&](const auto& array) { bytes += array.size() * sizeof(*array.data()); };
  for (const auto& r : residual_) add(r);
  for (const auto& a : blocks_) {
    add(a.ln1), add(a.qkv), add(a.atty), add(a.res2), add(a.ln2), add(a.fch), add(a.fch_gelu);
    add(a.ln1_mean), add(a.ln1_rstd), add(a.ln2_mean), add(a.ln2_rstd), add(a.att);
  }
  add(inputs_), add(targets_), add(token_rows_), add(lnf_), add(logits_), add(tmp_), add(dres_), add(dln_);
  add(dqkv_), add(datty_), add(dfch_), add(lnf_mean_), add(lnf_rstd_), add(lse_), add(losses_), add(dpre_), add(ln_scratch_);
  return bytes;
}

template <class T>
void GPT2Cuda<T>::init_params(void* flat, uint64_t seed) const {
  init_params_as<T>(GPT2Cpu<float>(config_, 1, 1), flat, seed);
}

template <class T>
void GPT2Cuda<T>::block_forward(BlockActs& a, T* res_out, const T* res_in, const BlockParams& p) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.channels, NH = config_.num_heads;
  cudaStream_t s = stream_.get();
  kc::decoder_layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), res_in, p.ln1w, p.ln1b, N, C, s);
  kc::decoder_matmul_forward(blas_, a.qkv.data(), a.ln1.data(), p.qkvw, p.qkvb, N, C, 3 * C, s);
  kc::decoder_attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, C, NH, s);
  kc::decoder_matmul_forward(blas_, tmp_.data(), a.atty.data(), p.attprojw, p.attprojb, N, C, C, s);
  kc::decoder_residual_forward(a.res2.data(), res_in, tmp_.data(), N * C, s);
  kc::decoder_layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p.ln2w, p.ln2b, N, C, s);
  kc::decoder_matmul_forward(blas_, a.fch.data(), a.ln2.data(), p.fcw, p.fcb, N, C, 4 * C, s);
  kc::decoder_gelu_forward(a.fch_gelu.data(), a.fch.data(), N * 4 * C, s);
  kc::decoder_matmul_forward(blas_, tmp_.data(), a.fch_gelu.data(), p.fcprojw, p.fcprojb, N, 4 * C, C, s);
  kc::decoder_residual_forward(res_out, a.res2.data(), tmp_.data(), N * C, s);
}

template <class T>
void GPT2Cuda<T>::block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p, const BlockGrads& g) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.channels, NH = config_.num_heads;
  cudaStream_t s = stream_.get();
  kc::decoder_matmul_backward(blas_, dfch_.data(), g.fcprojw, g.fcprojb, dres, a.fch_gelu.data(), p.fcprojw, N, 4 * C, C, s);
  kc::decoder_gelu_backward(dfch_.data(), a.fch.data(), dfch_.data(), N * 4 * C, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), g.fcw, g.fcb, dfch_.data(), a.ln2.data(), p.fcw, N, C, 4 * C, s);
  kc::decoder_layernorm_backward(dres, g.ln2w, g.ln2b, ln_scratch_.data(), dln_.data(), a.res2.data(), p.ln2w,
                              a.ln2_mean.data(), a.ln2_rstd.data(), N, C, s);
  kc::decoder_matmul_backward(blas_, datty_.data(), g.attprojw, g.attprojb, dres, a.atty.data(), p.attprojw, N, C, C, s);
  kc::decoder_attention_backward(dqkv_.data(), dpre_.data(), datty_.data(), a.qkv.data(), a.att.data(), B_, T_, C, NH, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), g.qkvw, g.qkvb, dqkv_.data(), a.ln1.data(), p.qkvw, N, C, 3 * C, s);
  kc::decoder_layernorm_backward(dres, g.ln1w, g.ln1b, ln_scratch_.data(), dln_.data(), res_in, p.ln1w,
                              a.ln1_mean.data(), a.ln1_rstd.data(), N, C, s);
}

template <class T>
float GPT2Cuda<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int Tn, ParamAccess& access) {
  check_token_batch("GPT-2", inputs, targets, B, Tn, max_batch_, max_seq_, config_.vocab_size);
  const size_t N = size_t(B) * Tn;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  kc::use_rank_device();  // the calling thread may not be the one that built the model
  B_ = B, T_ = Tn;
  has_targets_ = targets != nullptr;
  cudaStream_t stream = stream_.get();
  cuda_check(cudaMemcpyAsync(inputs_.data(), inputs, N * 4, cudaMemcpyHostToDevice, stream), "copy inputs");
  if (has_targets_)
    cuda_check(cudaMemcpyAsync(targets_.data(), targets, N * 4, cudaMemcpyHostToDevice, stream), "copy targets");
  host_inputs_.assign(inputs, inputs + N);

  access.acquire(0);
  access.prefetch(1);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  const T* wpe = static_cast<const T*>(access.param(gpt2_param_index(config_, kWpe, 0)));
  kc::decoder_positional_embedding_forward(residual_[0].data(), inputs_.data(), wte, wpe, B, Tn, C, stream);
  blocks_forward(access, [&](int l) {
    GpuLayerSpan on_gpu(stream, "forward layer", l + 1);
    block_forward(acts_of(l), residual_[l + 1].data(), residual_[l].data(), gpt2_block_params<T>(config_, access, l));
  });
  access.acquire(L + 1);
  const T* lnfw = static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfw, 0)));
  const T* lnfb = static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfb, 0)));
  kc::decoder_layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), residual_[L].data(), lnfw, lnfb, N, C,
                             stream);
  kc::decoder_matmul_forward(blas_, logits_.data(), lnf_.data(), wte, static_cast<const T*>(nullptr), N, C, Vp, stream);
  access.release(L + 1);
  access.release(0);

  counted_ = 0;
  if (!has_targets_) return 0.0f;
  kc::decoder_crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets_.data(), N, V, Vp, stream);
  if (loss_.kept()) {
    device_mean_loss(loss_.data(), losses_.data(), targets, N, stream, counted_);
    return std::numeric_limits<float>::quiet_NaN();
  }
  return host_mean_loss(losses_.data(), targets, N, stream, counted_);
}

template <class T>
void GPT2Cuda<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  if (!has_targets_)
    throw Error(ErrorKind::Usage, "GPT-2 backward: the last forward had no targets, so there is no loss to differentiate");
  has_targets_ = false;
  kc::use_rank_device();
  const size_t N = size_t(B_) * T_;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  cudaStream_t s = stream_.get();
  access.acquire(L + 1);
  access.acquire(0);
  access.prefetch(L);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  T* dwte = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWte, 0)));
  float dloss = counted_ ? grad_scale / static_cast<float>(counted_) : 0.0f;
  kc::decoder_crossentropy_backward(logits_.data(), lse_.data(), targets_.data(), dloss, N, V, Vp, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), dwte, static_cast<T*>(nullptr), logits_.data(), lnf_.data(), wte, N, C,
                           Vp, s);
  cuda_check(cudaMemsetAsync(dres_.data(), 0, N * C * sizeof(T), s), "memset");
  kc::decoder_layernorm_backward(dres_.data(), static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfw, 0))),
                              static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfb, 0))), ln_scratch_.data(),
                              dln_.data(), residual_[L].data(),
                              static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfw, 0))),
                              lnf_mean_.data(), lnf_rstd_.data(), N, C, s);
  // Gradients are final when the stream has run the kernels that write them: ZeRO on this
  // device orders its reads by an event; anyone else reads once the stream is done.
  const bool wait_for_stream = !sink.orders_after_device_work();
  auto ready = [&](int layer) {
    if (wait_for_stream) cuda_check(cudaStreamSynchronize(s), "backward");
    sink.ready(layer);
    access.release(layer);
  };
  ready(L + 1);
  blocks_backward(
      access,
      [&](int l) {
        GpuLayerSpan on_gpu(s, "backward layer", l + 1);
        const BlockParams p = gpt2_block_params<T>(config_, access, l);
        BlockActs& a = acts_of(l);
        if (checkpointing_) block_forward(a, tmp_.data() /* output not needed again */, residual_[l].data(), p);
        block_backward(dres_.data(), a, residual_[l].data(), p, gpt2_block_grads<T>(config_, sink, l));
      },
      ready);
  T* dwpe = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWpe, 0)));
  // wte's gradient rows summed per token in row order (no atomics): grouped on the host.
  // A member: the copy may still read it after this returns (the next forward waits for it).
  token_rows_host_ = kernels::group_rows_by_token(host_inputs_.data(), N, V);
  cuda_check(cudaMemcpyAsync(token_rows_.data(), token_rows_host_.packed.data(), token_rows_host_.packed.size() * 4,
                             cudaMemcpyHostToDevice, s),
             "copy token rows");
  kc::decoder_positional_embedding_backward(dwte, dwpe, dres_.data(), token_rows_.data(), token_rows_host_.distinct, B_, T_, C, s);
  ready(0);
}

template <class T>
std::vector<float> GPT2Cuda<T>::logits() const {
  const size_t N = size_t(B_) * T_;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  std::vector<float> padded(N * Vp), out(N * V);
  kc::use_rank_device();
  cuda_check(cudaStreamSynchronize(stream_.get()), "logits");
  download_as(padded.data(), logits_.data(), padded.size(), stream_.get());
  for (size_t r = 0; r < N; ++r) std::memcpy(out.data() + r * V, padded.data() + r * Vp, V * sizeof(float));
  return out;
}

float host_mean_loss(const float* device_losses, const int32_t* host_targets, size_t rows, cudaStream_t stream,
                     size_t& counted) {
  std::vector<float> losses(rows);
  cuda_check(cudaMemcpyAsync(losses.data(), device_losses, rows * 4, cudaMemcpyDeviceToHost, stream), "copy losses");
  cuda_check(cudaStreamSynchronize(stream), "forward");
  double sum = 0;
  counted = 0;
  for (size_t i = 0; i < rows; ++i) {
    sum += losses[i];
    counted += host_targets[i] >= 0;
  }
  return counted ? static_cast<float>(sum / counted) : 0.0f;
}

void device_mean_loss(float* out, const float* device_losses, const int32_t* host_targets, size_t rows,
                      cudaStream_t stream, size_t& counted) {
  counted = 0;
  for (size_t i = 0; i < rows; ++i) counted += host_targets[i] >= 0;
  // The rows as `rows` blocks of one element: one sum, in row order, as the CPU model's.
  const float factor = counted ? 1.0f / static_cast<float>(counted) : 0.0f;
  kc::sum_blocks(kernels::DType::F32, device_losses, rows, 1, factor, kernels::DType::F32, out, 1, false, stream);
}

template <class T>
void init_params_as(const Model& reference, void* flat, uint64_t seed) {
  if constexpr (sizeof(T) == 4) {
    reference.init_params(flat, seed);
  } else {
    std::vector<float> f(reference.num_params());
    reference.init_params(f.data(), seed);
    auto* out = static_cast<uint16_t*>(flat);
    for (size_t i = 0; i < f.size(); ++i) out[i] = bits_of<T>(f[i]);
  }
}

template void init_params_as<float>(const Model&, void*, uint64_t);
template void init_params_as<__nv_bfloat16>(const Model&, void*, uint64_t);
template void init_params_as<__half>(const Model&, void*, uint64_t);
template class DeviceArray<float>;
template class DeviceArray<int32_t>;
template class DeviceArray<__nv_bfloat16>;
template void upload_as<float>(float*, const float*, size_t, cudaStream_t);
template void upload_as<__nv_bfloat16>(__nv_bfloat16*, const float*, size_t, cudaStream_t);
template void download_as<float>(float*, const float*, size_t, cudaStream_t);
template void download_as<__nv_bfloat16>(float*, const __nv_bfloat16*, size_t, cudaStream_t);
template class GPT2Cuda<float>;
template class GPT2Cuda<__nv_bfloat16>;
template class DeviceArray<__half>;
template void upload_as<__half>(__half*, const float*, size_t, cudaStream_t);
template void download_as<__half>(float*, const __half*, size_t, cudaStream_t);
template class GPT2Cuda<__half>;

}  // namespace dsx::models
