// Llama-family forward and backward on the CPU, one layer at a time (see llama_cpu.h).
// Matmuls, attention and cross-entropy are GPT-2's CPU kernels: grouped-query attention runs as
// multi-head attention on q, k and v packed with their kv heads repeated
// (kernels/cpu/llama_layers.h).
#include "models/llama/llama_cpu.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/decoder_layers.h"
#include "kernels/cpu/llama_layers.h"
#include "models/token_batch.h"
#include "trace/trace.h"

namespace dsx::models {

namespace kc = dsx::kernels::cpu;

template <class T>
LlamaCpu<T>::LlamaCpu(const LlamaConfig& config, int max_batch, int max_seq, bool activation_checkpointing)
    : DecoderModel(config, llama_param_specs(checked_for_build(config, max_batch, max_seq)), max_batch, max_seq,
                   activation_checkpointing),
      layout_(config, specs_) {

  const size_t L = config.num_layers, C = config.hidden_size, F = config.intermediate_size;
  const size_t NH = config.num_heads, D = config.head_dim, QD = NH * D, KVD = size_t(config.num_kv_heads) * D;
  const size_t N = static_cast<size_t>(max_batch) * max_seq;
  const auto angles = llama_rope_angles(config, max_seq);
  cos_.resize(angles.size()), sin_.resize(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos_[i] = static_cast<T>(std::cos(angles[i]));
    sin_[i] = static_cast<T>(std::sin(angles[i]));
  }
  residual_.assign(L + 1, std::vector<T>(N * C));
  blocks_.resize(checkpointing_ ? 1 : L);
  for (auto& a : blocks_) {
    a.xn1.resize(N * C), a.rstd1.resize(N), a.qkv.resize(N * 3 * QD);
    a.att.resize(static_cast<size_t>(max_batch) * NH * max_seq * max_seq), a.atty.resize(N * QD);
    a.res2.resize(N * C), a.xn2.resize(N * C), a.rstd2.resize(N);
    a.gate.resize(N * F), a.up.resize(N * F), a.h.resize(N * F);
  }
  xf_.resize(N * C), rstdf_.resize(N);
  logits_.resize(N * config.vocab_size), lse_.resize(N), losses_.resize(N);
  q_.resize(N * QD), k_.resize(N * KVD), v_.resize(N * KVD), tmp_.resize(N * C), dres_.resize(N * C);
  dxn_.resize(N * C), datty_.resize(N * QD), dqkv_.resize(N * 3 * QD), dh_.resize(N * F), dup_.resize(N * F);
}

template <class T>
size_t LlamaCpu<T>::activation_bytes() const {
  std::vector<const std::vector<T>*> all{&cos_, &sin_, &xf_,   &rstdf_, &logits_, &lse_, &losses_, &q_, &k_,
                                         &v_,   &tmp_, &dres_, &dxn_,   &datty_,  &dqkv_, &dh_,    &dup_};
  for (const auto& r : residual_) all.push_back(&r);
  for (const auto& a : blocks_)
    all.insert(all.end(), {&a.xn1, &a.rstd1, &a.qkv, &a.att, &a.atty, &a.res2, &a.xn2, &a.rstd2, &a.gate, &a.up, &a.h});
  return capacity_bytes(all) + token_id_bytes();
}

template <class T>
void LlamaCpu<T>::init_params(void* flat, uint64_t seed) const {
  T* p = static_cast<T*>(flat);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.02);
  for (const auto& s : specs_) {
    T* w = p + s.offset;
    if (s.shape.size() == 2) {
      for (size_t i = 0; i < s.numel; ++i) w[i] = static_cast<T>(normal(rng));
    } else {
      const bool norm = s.name.ends_with("layernorm.weight") || s.name == "model.norm.weight";
      std::fill(w, w + s.numel, norm ? T(1) : T(0));
    }
  }
}

template <class T>
void LlamaCpu<T>::set_adapters(ProjectionAdapters* adapters) {
  if (adapters && !std::is_same_v<T, float>)
    throw Error(ErrorKind::Unsupported, "adapters (LoRA) run on the float Llama only");
  adapters_ = adapters;
}

template <class T>
void LlamaCpu<T>::set_quantized_base(QuantizedProjections* base) {
  if (base && !std::is_same_v<T, float>)
    throw Error(ErrorKind::Unsupported, "a quantised base (QLoRA) runs on the float Llama only");
  quantized_ = base;
}

template <class T>
void LlamaCpu<T>::project_forward(int block, Projection p, T* out, const T* inp, const T* w, const T* b, int in,
                                  int out_dim) {
  const size_t N = static_cast<size_t>(B_) * T_;
  if constexpr (std::is_same_v<T, float>) {
    if (quantized_ && quantized_->quantized(block, p)) {
      quantized_->forward(block, p, out, inp, N);
      if (b)
        for (size_t i = 0; i < N; ++i)
          for (int o = 0; o < out_dim; ++o) out[i * out_dim + o] += b[o];
      adapt_forward(block, p, out, inp);
      return;
    }
  }
  kc::decoder_matmul_forward_as(bf16_gemms_, out, inp, w, b, N, in, out_dim);
  adapt_forward(block, p, out, inp);
}

template <class T>
void LlamaCpu<T>::project_backward(int block, Projection p, T* dinp, T* dw, T* db, const T* dout, const T* inp,
                                   const T* w, int in, int out_dim) {
  const size_t N = static_cast<size_t>(B_) * T_;
  if constexpr (std::is_same_v<T, float>) {
    if (quantized_ && quantized_->quantized(block, p)) {  // frozen weight: dw is null; db trains with bias "all"
      quantized_->backward_input(block, p, dinp, dout, N);
      if (db) kc::add_column_sums(db, dout, N, out_dim, 0, out_dim);
      adapt_backward(block, p, dinp, dout, inp);
      return;
    }
  }
  kc::decoder_matmul_backward_as(bf16_gemms_, dinp, dw, db, dout, inp, w, N, in, out_dim);
  adapt_backward(block, p, dinp, dout, inp);
}

template <class T>
void LlamaCpu<T>::adapt_forward(int block, Projection p, T* out, const T* inp) {
  if constexpr (std::is_same_v<T, float>) {
    if (adapters_) adapters_->forward(block, p, out, inp, static_cast<size_t>(B_) * T_);
  }
}

template <class T>
void LlamaCpu<T>::adapt_backward(int block, Projection p, T* dinp, const T* dout, const T* inp) {
  if constexpr (std::is_same_v<T, float>) {
    if (adapters_) adapters_->backward(block, p, dinp, dout, inp, static_cast<size_t>(B_) * T_);
  }
}

template <class T>
void LlamaCpu<T>::block_forward(int block, BlockActs& a, T* res_out, const T* res_in, const BlockParams& p) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.hidden_size, F = config_.intermediate_size, NH = config_.num_heads;
  const int KV = config_.num_kv_heads, D = config_.head_dim, QD = NH * D, KVD = KV * D;
  const T eps = static_cast<T>(config_.rms_norm_eps);
  // res2 = input + o_proj(attention(rope(q, k), v)), q, k, v projections of rmsnorm(input)
  kc::llama_rmsnorm_forward(a.xn1.data(), a.rstd1.data(), res_in, p.ln1, N, C, eps);
  project_forward(block, Projection::q, q_.data(), a.xn1.data(), p.wq, p.bq, C, QD);
  project_forward(block, Projection::k, k_.data(), a.xn1.data(), p.wk, p.bk, C, KVD);
  project_forward(block, Projection::v, v_.data(), a.xn1.data(), p.wv, p.bv, C, KVD);
  kc::llama_qkv_pack_forward(a.qkv.data(), q_.data(), k_.data(), v_.data(), cos_.data(), sin_.data(), B_, T_, NH,
                         KV, D);
  kc::decoder_attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, QD, NH);
  project_forward(block, Projection::o, tmp_.data(), a.atty.data(), p.wo, p.bo, QD, C);
  kc::decoder_residual_forward(a.res2.data(), res_in, tmp_.data(), N * C);
  // output = res2 + down_proj(silu(gate_proj(x)) * up_proj(x)), x = rmsnorm(res2)
  kc::llama_rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.res2.data(), p.ln2, N, C, eps);
  project_forward(block, Projection::gate, a.gate.data(), a.xn2.data(), p.wg, static_cast<const T*>(nullptr), C, F);
  project_forward(block, Projection::up, a.up.data(), a.xn2.data(), p.wu, static_cast<const T*>(nullptr), C, F);
  kc::llama_swiglu_forward(a.h.data(), a.gate.data(), a.up.data(), N * F);
  project_forward(block, Projection::down, tmp_.data(), a.h.data(), p.wd, static_cast<const T*>(nullptr), F, C);
  kc::decoder_residual_forward(res_out, a.res2.data(), tmp_.data(), N * C);
}

// dxn = d loss / d rmsnorm1(input), from dres2 = d loss / d res2.
template <class T>
void LlamaCpu<T>::attention_backward(int block, T* dxn, const T* dres2, BlockActs& a, const BlockParams& p,
                                     const BlockGrads& g) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.hidden_size, NH = config_.num_heads, KV = config_.num_kv_heads, D = config_.head_dim;
  const int QD = NH * D, KVD = KV * D;
  project_backward(block, Projection::o, datty_.data(), g.wo, g.bo, dres2, a.atty.data(), p.wo, QD, C);
  kc::decoder_attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), B_, T_, QD, NH);
  kc::llama_qkv_pack_backward(q_.data(), k_.data(), v_.data(), dqkv_.data(), cos_.data(), sin_.data(), B_, T_, NH,
                          KV, D);
  // Three projections of one input: their input gradients add up.
  project_backward(block, Projection::q, dxn, g.wq, g.bq, q_.data(), a.xn1.data(), p.wq, C, QD);
  project_backward(block, Projection::k, tmp_.data(), g.wk, g.bk, k_.data(), a.xn1.data(), p.wk, C, KVD);
  for (size_t i = 0; i < N * C; ++i) dxn[i] += tmp_[i];
  project_backward(block, Projection::v, tmp_.data(), g.wv, g.bv, v_.data(), a.xn1.data(), p.wv, C, KVD);
  for (size_t i = 0; i < N * C; ++i) dxn[i] += tmp_[i];
}

// dres holds d loss / d (block output) on entry and d loss / d (block input) on return.
template <class T>
void LlamaCpu<T>::block_backward(int block, T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                                 const BlockGrads& g) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.hidden_size, F = config_.intermediate_size;
  T* const no_bias = nullptr;
  // MLP: dres becomes d loss / d res2 (the residual plus the path through rmsnorm2).
  project_backward(block, Projection::down, dh_.data(), g.wd, no_bias, dres, a.h.data(), p.wd, F, C);
  kc::llama_swiglu_backward(dh_.data() /* now dgate */, dup_.data(), dh_.data(), a.gate.data(), a.up.data(), N * F);
  project_backward(block, Projection::gate, dxn_.data(), g.wg, no_bias, dh_.data(), a.xn2.data(), p.wg, C, F);
  project_backward(block, Projection::up, tmp_.data(), g.wu, no_bias, dup_.data(), a.xn2.data(), p.wu, C, F);
  for (size_t i = 0; i < N * C; ++i) dxn_[i] += tmp_[i];
  kc::llama_rmsnorm_backward(dres, g.ln2, dxn_.data(), a.res2.data(), p.ln2, a.rstd2.data(), N, C);
  // Attention: dres becomes d loss / d input.
  attention_backward(block, dxn_.data(), dres, a, p, g);
  kc::llama_rmsnorm_backward(dres, g.ln1, dxn_.data(), res_in, p.ln1, a.rstd1.data(), N, C);
}

template <class T>
float LlamaCpu<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int Tn, ParamAccess& access) {
  check_token_batch("Llama", inputs, targets, B, Tn, max_batch_, max_seq_, config_.vocab_size);
  B_ = B, T_ = Tn;
  const size_t N = static_cast<size_t>(B) * Tn;
  const int L = config_.num_layers, C = config_.hidden_size, V = config_.vocab_size;
  const bool tied = config_.tie_word_embeddings;
  inputs_.assign(inputs, inputs + N);
  has_targets_ = targets != nullptr;
  if (has_targets_) targets_.assign(targets, targets + N);

  access.acquire(0);  // tied: stays acquired until the head has run
  access.prefetch(1);
  kc::llama_embedding_forward(residual_[0].data(), inputs, static_cast<const T*>(access.param(0)), N, C);
  if (!tied) access.release(0);
  blocks_forward(access, [&](int l) {
    trace::Scope span("forward layer", l + 1, "layer");
    block_forward(l, acts_of(l), residual_[l + 1].data(), residual_[l].data(), llama_block_params<T>(layout_, access, l));
  });
  trace::Scope head("forward head", "layer");  // the final norm, logits and loss
  access.acquire(L + 1);
  const T* normw = static_cast<const T*>(access.param(layout_.norm_index()));
  kc::llama_rmsnorm_forward(xf_.data(), rstdf_.data(), residual_[L].data(), normw, N, C,
                        static_cast<T>(config_.rms_norm_eps));
  const T* head_w = static_cast<const T*>(access.param(layout_.head_index()));
  kc::decoder_classifier_forward_as(bf16_gemms_, logits_.data(), xf_.data(), head_w, N, C, V, V);
  access.release(L + 1);
  if (tied) access.release(0);

  mean_loss_ = 0;
  counted_ = 0;
  if (has_targets_) {
    counted_ = kc::decoder_crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets, N, V, V);
    mean_loss_ = kc::decoder_mean_loss(losses_.data(), N, counted_);
  }
  return static_cast<float>(mean_loss_);
}

// Layer L+1 (and, tied, the embedding's gradient from the head): leaves d loss / d residual_[L]
// in dres_.
template <class T>
void LlamaCpu<T>::head_backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const int C = config_.hidden_size, V = config_.vocab_size;
  trace::Scope span("backward head", "layer");
  const T* head_w = static_cast<const T*>(access.param(layout_.head_index()));
  T* dhead_w = static_cast<T*>(sink.grad(layout_.head_index()));
  const T dloss = counted_ ? static_cast<T>(grad_scale) / static_cast<T>(counted_) : T(0);
  kc::decoder_crossentropy_backward(logits_.data(), lse_.data(), targets_.data(), dloss, N, V, V);
  kc::decoder_classifier_backward_as(bf16_gemms_, dxn_.data(), dhead_w, logits_.data(), xf_.data(), head_w, N, C,
                                     V, V);
  std::fill(dres_.begin(), dres_.begin() + N * C, T(0));
  const size_t norm = layout_.norm_index();
  kc::llama_rmsnorm_backward(dres_.data(), static_cast<T*>(sink.grad(norm)), dxn_.data(),
                         residual_[config_.num_layers].data(), static_cast<const T*>(access.param(norm)),
                         rstdf_.data(), N, C);
}

template <class T>
void LlamaCpu<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  if (!has_targets_)
    throw Error(ErrorKind::Usage, "Llama backward: the last forward had no targets, so there is no loss to differentiate");
  const int L = config_.num_layers, C = config_.hidden_size;
  const bool tied = config_.tie_word_embeddings;
  has_targets_ = false;  // the logits become their gradient below

  access.acquire(L + 1);
  if (tied) access.acquire(0);  // the head's weight is the embedding
  access.prefetch(L);
  head_backward(access, sink, grad_scale);
  const auto done = [&](int layer) { sink.ready(layer), access.release(layer); };
  done(L + 1);
  blocks_backward(
      access,
      [&](int l) {
        trace::Scope span("backward layer", l + 1, "layer");
        const BlockParams p = llama_block_params<T>(layout_, access, l);
        BlockActs& a = acts_of(l);
        if (checkpointing_) block_forward(l, a, tmp_.data() /* output not needed again */, residual_[l].data(), p);
        block_backward(l, dres_.data(), a, residual_[l].data(), p, llama_block_grads<T>(layout_, sink, l));
      },
      done);

  if (!tied) access.acquire(0);
  if (T* dtable = static_cast<T*>(sink.grad(0)))  // null: a frozen embedding (LoRA)
    kc::llama_embedding_backward(dtable, dres_.data(), inputs_.data(), static_cast<size_t>(B_) * T_, C);
  done(0);
}

template <class T>
std::vector<float> LlamaCpu<T>::logits() const {
  const size_t n = static_cast<size_t>(B_) * T_ * config_.vocab_size;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(logits_[i]);
  return out;
}

template class LlamaCpu<float>;
template class LlamaCpu<double>;

}  // namespace dsx::models
