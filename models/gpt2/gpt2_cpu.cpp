// GPT-2 forward and backward on the CPU, one layer at a time (see gpt2_cpu.h).
#include "models/gpt2/gpt2_cpu.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "kernels/cpu/bf16_attention.h"
#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/decoder_layers.h"
#include "models/token_batch.h"
#include "trace/trace.h"

namespace dsx::models {

namespace kc = dsx::kernels::cpu;

template <class T>
GPT2Cpu<T>::GPT2Cpu(const GPT2Config& config, int max_batch, int max_seq, bool activation_checkpointing)
    : DecoderModel(config, gpt2_param_specs(checked_for_build(config, max_batch, max_seq)), max_batch, max_seq,
                   activation_checkpointing) {
  const size_t L = config.num_layers, C = config.channels, NH = config.num_heads;
  const size_t N = static_cast<size_t>(max_batch) * max_seq;
  residual_.assign(L + 1, std::vector<T>(N * C));
  blocks_.resize(checkpointing_ ? 1 : L);
  for (auto& a : blocks_) {
    a.ln1.resize(N * C), a.ln1_mean.resize(N), a.ln1_rstd.resize(N), a.qkv.resize(N * 3 * C);
    a.att.resize(static_cast<size_t>(max_batch) * NH * max_seq * max_seq), a.atty.resize(N * C);
    a.res2.resize(N * C), a.ln2.resize(N * C), a.ln2_mean.resize(N), a.ln2_rstd.resize(N);
    a.fch.resize(N * 4 * C), a.fch_gelu.resize(N * 4 * C);
  }
  lnf_.resize(N * C), lnf_mean_.resize(N), lnf_rstd_.resize(N);
  logits_.resize(N * config.padded_vocab_size), lse_.resize(N), losses_.resize(N);
  tmp_.resize(N * C), dres_.resize(N * C), dln_.resize(N * C), dqkv_.resize(N * 3 * C);
  datty_.resize(N * C), dfch_.resize(N * 4 * C);
}

template <class T>
size_t GPT2Cpu<T>::activation_bytes() const {
  std::vector<const std::vector<T>*> all{&lnf_, &lnf_mean_, &lnf_rstd_, &logits_, &lse_,  &losses_,
                                         &tmp_, &dres_,     &dln_,      &dqkv_,   &datty_, &dfch_};
  for (const auto& r : residual_) all.push_back(&r);
  for (const auto& a : blocks_)
    all.insert(all.end(), {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.att, &a.atty, &a.res2, &a.ln2,
                           &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu});
  return capacity_bytes(all) + token_id_bytes();
}

template <class T>
void GPT2Cpu<T>::init_params(void* flat, uint64_t seed) const {
  // GPT-2's initialisation: N(0, 0.02) for embeddings and matrices, scaled by 1/sqrt(2L) for the
  // two projections that add into the residual stream; LayerNorm weights 1, biases 0; the padded
  // vocabulary rows 0.
  T* p = static_cast<T*>(flat);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double proj_std = 0.02 / std::sqrt(2.0 * config_.num_layers);
  for (const auto& s : specs_) {
    T* w = p + s.offset;
    bool is_proj = s.name.ends_with("c_proj.weight");
    bool is_ln_weight = s.name.ends_with("ln_1.weight") || s.name.ends_with("ln_2.weight") ||
                        s.name == "ln_f.weight";
    if (s.shape.size() == 2) {
      double std = is_proj ? proj_std : 0.02;
      size_t n = s.numel;
      if (s.name == "wte.weight") n = static_cast<size_t>(config_.vocab_size) * config_.channels;
      for (size_t i = 0; i < n; ++i) w[i] = static_cast<T>(std * normal(rng));
      std::fill(w + n, w + s.numel, T(0));
    } else {
      std::fill(w, w + s.numel, is_ln_weight ? T(1) : T(0));
    }
  }
}

template <class T>
void GPT2Cpu<T>::set_adapters(Gpt2ProjectionAdapters* adapters) {
  if (adapters && !std::is_same_v<T, float>)
    throw Error(ErrorKind::Unsupported, "adapters (LoRA) run on the float GPT-2 only");
  adapters_ = adapters;
}

template <class T>
void GPT2Cpu<T>::adapt_forward(int block, Gpt2Projection p, T* out, const T* inp) {
  if constexpr (std::is_same_v<T, float>) {
    if (adapters_) adapters_->forward(block, p, out, inp, static_cast<size_t>(B_) * T_);
  }
}

template <class T>
void GPT2Cpu<T>::adapt_backward(int block, Gpt2Projection p, T* dinp, const T* dout, const T* inp) {
  if constexpr (std::is_same_v<T, float>) {
    if (adapters_) adapters_->backward(block, p, dinp, dout, inp, static_cast<size_t>(B_) * T_);
  }
}

template <class T>
void GPT2Cpu<T>::block_forward(int block, BlockActs& a, T* res_out, const T* res_in, const BlockParams& p) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.channels, NH = config_.num_heads;
  kc::decoder_layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), res_in, p.ln1w, p.ln1b, N, C);
  kc::decoder_matmul_forward_as(bf16_gemms_, a.qkv.data(), a.ln1.data(), p.qkvw, p.qkvb, N, C, 3 * C);
  adapt_forward(block, Gpt2Projection::c_attn, a.qkv.data(), a.ln1.data());
  kc::decoder_attention_forward_as(bf16_gemms_, a.atty.data(), a.att.data(), a.qkv.data(), B_, T_,
                                   C, NH);
  kc::decoder_matmul_forward_as(bf16_gemms_, tmp_.data(), a.atty.data(), p.attprojw, p.attprojb, N, C, C);
  adapt_forward(block, Gpt2Projection::attn_proj, tmp_.data(), a.atty.data());
  kc::decoder_residual_forward(a.res2.data(), res_in, tmp_.data(), N * C);
  kc::decoder_layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p.ln2w, p.ln2b, N, C);
  kc::decoder_matmul_forward_as(bf16_gemms_, a.fch.data(), a.ln2.data(), p.fcw, p.fcb, N, C, 4 * C);
  adapt_forward(block, Gpt2Projection::c_fc, a.fch.data(), a.ln2.data());
  kc::decoder_gelu_forward(a.fch_gelu.data(), a.fch.data(), N * 4 * C);
  kc::decoder_matmul_forward_as(bf16_gemms_, tmp_.data(), a.fch_gelu.data(), p.fcprojw, p.fcprojb, N, 4 * C, C);
  adapt_forward(block, Gpt2Projection::mlp_proj, tmp_.data(), a.fch_gelu.data());
  kc::decoder_residual_forward(res_out, a.res2.data(), tmp_.data(), N * C);
}

// dres holds d loss / d (block output) on entry and d loss / d (block input) on return.
template <class T>
void GPT2Cpu<T>::block_backward(int block, T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                                const BlockGrads& g) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.channels, NH = config_.num_heads;
  // output = res2 + fcproj(gelu(fc(ln2(res2))))
  kc::decoder_matmul_backward_as(bf16_gemms_, dfch_.data(), g.fcprojw, g.fcprojb, dres, a.fch_gelu.data(), p.fcprojw, N, 4 * C, C);
  adapt_backward(block, Gpt2Projection::mlp_proj, dfch_.data(), dres, a.fch_gelu.data());
  kc::decoder_gelu_backward(dfch_.data(), a.fch.data(), dfch_.data(), N * 4 * C);
  kc::decoder_matmul_backward_as(bf16_gemms_, dln_.data(), g.fcw, g.fcb, dfch_.data(), a.ln2.data(), p.fcw, N, C, 4 * C);
  adapt_backward(block, Gpt2Projection::c_fc, dln_.data(), dfch_.data(), a.ln2.data());
  kc::decoder_layernorm_backward(dres, g.ln2w, g.ln2b, dln_.data(), a.res2.data(), p.ln2w, a.ln2_mean.data(),
                              a.ln2_rstd.data(), N, C);
  // res2 = input + attproj(attention(qkv(ln1(input))))
  kc::decoder_matmul_backward_as(bf16_gemms_, datty_.data(), g.attprojw, g.attprojb, dres, a.atty.data(), p.attprojw, N, C, C);
  adapt_backward(block, Gpt2Projection::attn_proj, datty_.data(), dres, a.atty.data());
  kc::decoder_attention_backward_as(bf16_gemms_, dqkv_.data(), datty_.data(), a.qkv.data(),
                                    a.att.data(), B_, T_, C, NH);
  kc::decoder_matmul_backward_as(bf16_gemms_, dln_.data(), g.qkvw, g.qkvb, dqkv_.data(), a.ln1.data(), p.qkvw, N, C, 3 * C);
  adapt_backward(block, Gpt2Projection::c_attn, dln_.data(), dqkv_.data(), a.ln1.data());
  kc::decoder_layernorm_backward(dres, g.ln1w, g.ln1b, dln_.data(), res_in, p.ln1w, a.ln1_mean.data(),
                              a.ln1_rstd.data(), N, C);
}

template <class T>
float GPT2Cpu<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int Tn, ParamAccess& access) {
  check_token_batch("GPT-2", inputs, targets, B, Tn, max_batch_, max_seq_, config_.vocab_size);
  B_ = B, T_ = Tn;
  const size_t N = static_cast<size_t>(B) * Tn;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  inputs_.assign(inputs, inputs + N);
  has_targets_ = targets != nullptr;
  if (has_targets_) targets_.assign(targets, targets + N);

  access.acquire(0);  // stays acquired until the tied head has run
  access.prefetch(1);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  const T* wpe = static_cast<const T*>(access.param(gpt2_param_index(config_, kWpe, 0)));
  kc::decoder_positional_embedding_forward(residual_[0].data(), inputs, wte, wpe, B, Tn, C);
  blocks_forward(access, [&](int l) {
    trace::Scope span("forward layer", l + 1, "layer");
    block_forward(l, acts_of(l), residual_[l + 1].data(), residual_[l].data(), gpt2_block_params<T>(config_, access, l));
  });
  trace::Scope head("forward head", "layer");  // the final layer norm, logits and loss
  access.acquire(L + 1);
  const T* lnfw = static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfw, 0)));
  const T* lnfb = static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfb, 0)));
  kc::decoder_layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), residual_[L].data(), lnfw, lnfb, N, C);
  // bf16: the loss is taken from each vocabulary slice while it is in cache.
  bool loss_taken = false;
  if constexpr (std::is_same_v<T, float>) {
    if (bf16_gemms_ && has_targets_) {
      counted_ = kc::decoder_classifier_crossentropy_forward_bf16(
          logits_.data(), losses_.data(), lse_.data(), lnf_.data(), wte, targets, N, C, V, Vp);
      loss_taken = true;
    }
  }
  if (!loss_taken)
    kc::decoder_classifier_forward_as(bf16_gemms_, logits_.data(), lnf_.data(), wte, N, C, V, Vp);
  access.release(L + 1);
  access.release(0);

  mean_loss_ = 0;
  if (!loss_taken) counted_ = 0;
  if (has_targets_) {
    if (!loss_taken)
      counted_ = kc::decoder_crossentropy_forward(losses_.data(), lse_.data(), logits_.data(),
                                                  targets, N, V, Vp);
    mean_loss_ = kc::decoder_mean_loss(losses_.data(), N, counted_);
  }
  return static_cast<float>(mean_loss_);
}

template <class T>
void GPT2Cpu<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  if (!has_targets_)
    throw Error(ErrorKind::Usage, "GPT-2 backward: the last forward had no targets, so there is no loss to differentiate");
  const size_t N = static_cast<size_t>(B_) * T_;
  const int L = config_.num_layers, C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
  // The logits become their gradient below (in fp32; bf16 makes it per slice).
  has_targets_ = false;

  // Head: logits = lnf(residual_L) @ wte^T, tied to the embedding (layer 0).
  auto head = std::make_optional<trace::Scope>("backward head", "layer");
  access.acquire(L + 1);
  access.acquire(0);
  access.prefetch(L);
  const T* wte = static_cast<const T*>(access.param(gpt2_param_index(config_, kWte, 0)));
  T* dwte = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWte, 0)));
  T dloss = counted_ ? static_cast<T>(grad_scale) / static_cast<T>(counted_) : T(0);
  kc::decoder_crossentropy_classifier_backward_as(bf16_gemms_, dln_.data(), dwte, logits_.data(),
                                                  lse_.data(), targets_.data(), dloss, lnf_.data(),
                                                  wte, N, C, V, Vp);
  std::fill(dres_.begin(), dres_.begin() + N * C, T(0));
  kc::decoder_layernorm_backward(dres_.data(), static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfw, 0))),
                              static_cast<T*>(sink.grad(gpt2_param_index(config_, kLnfb, 0))), dln_.data(),
                              residual_[L].data(),
                              static_cast<const T*>(access.param(gpt2_param_index(config_, kLnfw, 0))),
                              lnf_mean_.data(), lnf_rstd_.data(), N, C);
  head.reset();
  const auto done = [&](int layer) { sink.ready(layer), access.release(layer); };
  done(L + 1);
  blocks_backward(
      access,
      [&](int l) {
        trace::Scope span("backward layer", l + 1, "layer");
        const BlockParams p = gpt2_block_params<T>(config_, access, l);
        BlockActs& a = acts_of(l);
        if (checkpointing_) block_forward(l, a, tmp_.data() /* output not needed again */, residual_[l].data(), p);
        block_backward(l, dres_.data(), a, residual_[l].data(), p, gpt2_block_grads<T>(config_, sink, l));
      },
      done);

  T* dwpe = static_cast<T*>(sink.grad(gpt2_param_index(config_, kWpe, 0)));
  kc::decoder_positional_embedding_backward(dwte, dwpe, dres_.data(), inputs_.data(), B_, T_, C);
  done(0);
}

template <class T>
std::vector<float> GPT2Cpu<T>::logits() const {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  std::vector<float> out(N * V);
  for (size_t r = 0; r < N; ++r)
    for (int i = 0; i < V; ++i) out[r * V + i] = static_cast<float>(logits_[r * Vp + i]);
  return out;
}

template class GPT2Cpu<float>;
template class GPT2Cpu<double>;

}  // namespace dsx::models
