// GPT-2 forward and backward on one GPU (see gpt2_cuda.h). The layer sequence is GPT2Cpu's.
#include "models/gpt2/gpt2_cuda.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "dsx/error.h"
#include "kernels/column_sums.h"
#include "kernels/cuda/batch_tokens.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/gpt2/gpu_layer_span.h"
#include "models/token_batch.h"

namespace dsx::models {

namespace kc = dsx::kernels::cuda;

namespace {

// How long the host waits for the model's stream (logits, a sink that reads gradients at once).
constexpr std::chrono::minutes kStreamWait{5};

}  // namespace

template <class T>
void download_as(device::Device& gpu, float* host, const T* data, size_t n) {
  if constexpr (sizeof(T) == 4) {
    gpu.copy_now(host, data, n * 4);
  } else {
    std::vector<uint16_t> bits(n);
    gpu.copy_now(bits.data(), data, n * 2);
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
  allocate_activations();
}

template <class T>
void GPT2Cuda<T>::allocate_activations() {
  device::Device& gpu = stream_.device();
  const size_t L = config_.num_layers, C = config_.channels, NH = config_.num_heads;
  const size_t N = size_t(max_batch_) * max_seq_, att = size_t(max_batch_) * NH * max_seq_ * max_seq_;
  auto of = [&gpu](size_t n) { return DeviceBuffer<T>(gpu, n); };
  auto floats = [&gpu](size_t n) { return DeviceBuffer<float>(gpu, n); };
  auto ints = [&gpu](size_t n) { return DeviceBuffer<int32_t>(gpu, n); };
  for (size_t l = 0; l <= L; ++l) residual_.push_back(of(N * C));
  blocks_.resize(checkpointing_ ? 1 : L);
  for (auto& a : blocks_) {
    a.ln1 = of(N * C), a.qkv = of(N * 3 * C), a.atty = of(N * C), a.res2 = of(N * C), a.ln2 = of(N * C);
    a.fch = of(N * 4 * C), a.fch_gelu = of(N * 4 * C), a.att = floats(att);
    a.ln1_mean = floats(N), a.ln1_rstd = floats(N), a.ln2_mean = floats(N), a.ln2_rstd = floats(N);
  }
  inputs_ = ints(N), targets_ = ints(N), counted_on_device_ = ints(1);
  grouped_rows_ = ints(kc::grouped_rows_capacity(N)), group_scratch_ = ints(kc::grouped_rows_scratch(N));
  lnf_ = of(N * C), logits_ = of(N * config_.padded_vocab_size);
  tmp_ = of(N * C), dres_ = of(N * C), dln_ = of(N * C), dqkv_ = of(N * 3 * C), datty_ = of(N * C);
  dfch_ = of(N * 4 * C);
  lnf_mean_ = floats(N), lnf_rstd_ = floats(N), lse_ = floats(N), losses_ = floats(N), dpre_ = floats(att);
  ln_scratch_ = floats(kernels::column_sums_scratch_floats(N, C)), loss_ = floats(1);
}

template <class T>
GPT2Cuda<T>::~GPT2Cuda() {
  stream_.device().make_current();  // cuBLASLt's state is freed on this thread
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
  add(inputs_), add(targets_), add(grouped_rows_), add(group_scratch_), add(counted_on_device_), add(lnf_), add(logits_), add(tmp_), add(dres_), add(dln_);
  add(dqkv_), add(datty_), add(dfch_), add(lnf_mean_), add(lnf_rstd_), add(lse_), add(losses_), add(dpre_), add(ln_scratch_);
  add(loss_);
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
  adapt_forward(Gpt2Projection::c_attn, a.qkv.data(), a.ln1.data());
  kc::decoder_attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, C, NH, s);
  kc::decoder_matmul_forward(blas_, tmp_.data(), a.atty.data(), p.attprojw, p.attprojb, N, C, C, s);
  adapt_forward(Gpt2Projection::attn_proj, tmp_.data(), a.atty.data());
  kc::decoder_residual_forward(a.res2.data(), res_in, tmp_.data(), N * C, s);
  kc::decoder_layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p.ln2w, p.ln2b, N, C, s);
  kc::decoder_matmul_forward(blas_, a.fch.data(), a.ln2.data(), p.fcw, p.fcb, N, C, 4 * C, s);
  adapt_forward(Gpt2Projection::c_fc, a.fch.data(), a.ln2.data());
  kc::decoder_gelu_forward(a.fch_gelu.data(), a.fch.data(), N * 4 * C, s);
  kc::decoder_matmul_forward(blas_, tmp_.data(), a.fch_gelu.data(), p.fcprojw, p.fcprojb, N, 4 * C, C, s);
  adapt_forward(Gpt2Projection::mlp_proj, tmp_.data(), a.fch_gelu.data());
  kc::decoder_residual_forward(res_out, a.res2.data(), tmp_.data(), N * C, s);
}

template <class T>
void GPT2Cuda<T>::block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p, const BlockGrads& g) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.channels, NH = config_.num_heads;
  cudaStream_t s = stream_.get();
  kc::decoder_matmul_backward(blas_, dfch_.data(), g.fcprojw, g.fcprojb, dres, a.fch_gelu.data(), p.fcprojw, N, 4 * C, C, s);
  adapt_backward(Gpt2Projection::mlp_proj, dfch_.data(), dres, a.fch_gelu.data());
  kc::decoder_gelu_backward(dfch_.data(), a.fch.data(), dfch_.data(), N * 4 * C, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), g.fcw, g.fcb, dfch_.data(), a.ln2.data(), p.fcw, N, C, 4 * C, s);
  adapt_backward(Gpt2Projection::c_fc, dln_.data(), dfch_.data(), a.ln2.data());
  kc::decoder_layernorm_backward(dres, g.ln2w, g.ln2b, ln_scratch_.data(), dln_.data(), a.res2.data(), p.ln2w,
                              a.ln2_mean.data(), a.ln2_rstd.data(), N, C, s);
  kc::decoder_matmul_backward(blas_, datty_.data(), g.attprojw, g.attprojb, dres, a.atty.data(), p.attprojw, N, C, C, s);
  adapt_backward(Gpt2Projection::attn_proj, datty_.data(), dres, a.atty.data());
  kc::decoder_attention_backward(dqkv_.data(), dpre_.data(), datty_.data(), a.qkv.data(), a.att.data(), B_, T_, C, NH, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), g.qkvw, g.qkvb, dqkv_.data(), a.ln1.data(), p.qkvw, N, C, 3 * C, s);
  adapt_backward(Gpt2Projection::c_attn, dln_.data(), dqkv_.data(), a.ln1.data());
  kc::decoder_layernorm_backward(dres, g.ln1w, g.ln1b, ln_scratch_.data(), dln_.data(), res_in, p.ln1w,
                              a.ln1_mean.data(), a.ln1_rstd.data(), N, C, s);
}

template <class T>
float GPT2Cuda<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int Tn, ParamAccess& access) {
  check_token_batch("GPT-2", inputs, targets, B, Tn, max_batch_, max_seq_, config_.vocab_size);
  const size_t N = size_t(B) * Tn;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  device::Device& gpu = stream_.device();
  device::Stream& on = stream_.stream();
  gpu.make_current();  // the calling thread may not be the one that built the model
  B_ = B, T_ = Tn;
  has_targets_ = targets != nullptr;
  cudaStream_t stream = stream_.get();
  gpu.copy(inputs_.data(), inputs, N * 4, on);
  if (has_targets_) gpu.copy(targets_.data(), targets, N * 4, on);

  access.acquire(0);
  access.prefetch(1);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  const T* wpe = static_cast<const T*>(access.param(gpt2_param_index(config_, kWpe, 0)));
  kc::decoder_positional_embedding_forward(residual_[0].data(), inputs_.data(), wte, wpe, B, Tn, C, stream);
  blocks_forward(access, [&](int l) {
    GpuLayerSpan on_gpu(gpu, on, "forward layer", l + 1);
    block_ = l;
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

  if (!has_targets_) return 0.0f;
  kc::decoder_crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets_.data(), N, V, Vp, stream);
  kc::decoder_mean_loss(loss_.data(), counted_on_device_.data(), losses_.data(), targets_.data(), N, stream);
  if (keep_loss_) return std::numeric_limits<float>::quiet_NaN();
  // The caller wants the loss now: one float read back once the stream got there.
  float loss = 0.0f;
  on.synchronize(kStreamWait);
  gpu.copy_now(&loss, loss_.data(), sizeof loss);
  return loss;
}

template <class T>
void GPT2Cuda<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  if (!has_targets_)
    throw Error(ErrorKind::Usage, "GPT-2 backward: the last forward had no targets, so there is no loss to differentiate");
  has_targets_ = false;
  device::Device& gpu = stream_.device();
  device::Stream& on = stream_.stream();
  gpu.make_current();
  const size_t N = size_t(B_) * T_;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  cudaStream_t s = stream_.get();
  access.acquire(L + 1);
  access.acquire(0);
  access.prefetch(L);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  T* dwte = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWte, 0)));
  // The embedding's rows grouped by token, made on the GPU while backward's first kernels queue
  // (a frozen embedding, LoRA's, takes no gradient).
  if (dwte)
    kc::group_rows_by_token(grouped_rows_.data(), group_scratch_.data(), inputs_.data(), N, s);
  // d(mean loss) = grad_scale / counted, with the count forward left on the GPU.
  kc::decoder_crossentropy_backward(logits_.data(), lse_.data(), targets_.data(), grad_scale, counted_on_device_.data(),
                                    N, V, Vp, s);
  kc::decoder_matmul_backward(blas_, dln_.data(), dwte, static_cast<T*>(nullptr), logits_.data(), lnf_.data(), wte, N, C,
                           Vp, s);
  gpu.fill_zero(dres_.data(), dres_.bytes(), on);
  kc::decoder_layernorm_backward(dres_.data(), static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfw, 0))),
                              static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfb, 0))), ln_scratch_.data(),
                              dln_.data(), residual_[L].data(),
                              static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfw, 0))),
                              lnf_mean_.data(), lnf_rstd_.data(), N, C, s);
  // Gradients are final when the stream has run the kernels that write them: ZeRO on this
  // device orders its reads by an event; anyone else reads once the stream is done.
  const bool wait_for_stream = !sink.orders_after_device_work();
  auto ready = [&](int layer) {
    if (wait_for_stream) on.synchronize(kStreamWait);
    sink.ready(layer);
    access.release(layer);
  };
  ready(L + 1);
  blocks_backward(
      access,
      [&](int l) {
        GpuLayerSpan on_gpu(gpu, on, "backward layer", l + 1);
        block_ = l;
        const BlockParams p = gpt2_block_params<T>(config_, access, l);
        BlockActs& a = acts_of(l);
        if (checkpointing_) block_forward(a, tmp_.data() /* output not needed again */, residual_[l].data(), p);
        block_backward(dres_.data(), a, residual_[l].data(), p, gpt2_block_grads<T>(config_, sink, l));
      },
      ready);
  embedding_backward(sink);
  ready(0);
}

// wte's gradient rows summed per token in row order (no atomics), over the rows grouped at the
// start of backward; wpe's per position.
template <class T>
void GPT2Cuda<T>::embedding_backward(GradSink& sink) {
  T* dwte = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWte, 0)));
  T* dwpe = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWpe, 0)));
  if (!dwte || !dwpe) return;  // a frozen embedding (LoRA)
  kc::decoder_positional_embedding_backward(dwte, dwpe, dres_.data(), grouped_rows_.data(), B_, T_, config_.channels,
                                            stream_.get());
}

template <class T>
void GPT2Cuda<T>::adapt_forward(Gpt2Projection p, T* out, const T* inp) {
  if (adapters_) adapters_->forward(block_, p, out, inp, size_t(B_) * T_);
}

template <class T>
void GPT2Cuda<T>::adapt_backward(Gpt2Projection p, T* dinp, const T* dout, const T* inp) {
  if (adapters_) adapters_->backward(block_, p, dinp, dout, inp, size_t(B_) * T_);
}

template <class T>
std::vector<float> GPT2Cuda<T>::logits() const {
  const size_t N = size_t(B_) * T_;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  std::vector<float> padded(N * Vp), out(N * V);
  stream_.device().make_current();
  stream_.stream().synchronize(kStreamWait);
  download_as(stream_.device(), padded.data(), logits_.data(), padded.size());
  for (size_t r = 0; r < N; ++r) std::memcpy(out.data() + r * V, padded.data() + r * Vp, V * sizeof(float));
  return out;
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
template void download_as<float>(device::Device&, float*, const float*, size_t);
template void download_as<__nv_bfloat16>(device::Device&, float*, const __nv_bfloat16*, size_t);
template void download_as<__half>(device::Device&, float*, const __half*, size_t);
template class GPT2Cuda<float>;
template class GPT2Cuda<__nv_bfloat16>;
template class GPT2Cuda<__half>;

}  // namespace dsx::models
