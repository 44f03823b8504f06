// Llama-family forward and backward on one GPU (see llama_cuda.h). The layer sequence is
// LlamaCpu's; matmuls are DecoderBlas's cuBLASLt plans, cross-entropy and the own attention GPT-2's.
#include "models/llama/llama_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "kernels/column_sums.h"
#include "kernels/cuda/batch_tokens.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/llama_layers.h"
#include "kernels/decoder_math.h"
#include "kernels/dtype.h"
#include "models/gpt2/gpu_layer_span.h"
#include "models/llama/llama_cpu.h"
#include "models/token_batch.h"

namespace dsx::models {

namespace kc = dsx::kernels::cuda;

namespace {

// How long the host waits for the model's stream before Error(Timeout).
constexpr std::chrono::minutes kStreamWait{5};

// DSX_ATTENTION: 0 auto (unset, empty or "auto"), 1 own, 2 cudnn.
int attention_override() {
  const char* v = std::getenv("DSX_ATTENTION");
  if (!v || !*v || std::strcmp(v, "auto") == 0) return 0;
  if (std::strcmp(v, "own") == 0) return 1;
  if (std::strcmp(v, "cudnn") == 0) return 2;
  throw Error(ErrorKind::Config,
              std::string("DSX_ATTENTION=") + v +
                  " is not one of auto, own (dsx's kernels) or cudnn (cuDNN's fused attention)");
}

kc::AttentionShape attention_shape(const LlamaConfig& c, int B, int Tn, kernels::DType dtype) {
  kc::AttentionShape s;
  s.B = B, s.T = Tn, s.NH = c.num_heads, s.KV = c.num_kv_heads, s.D = c.head_dim;
  s.scale = kernels::decoder::attention_scale<float>(c.head_dim);
  s.dtype = dtype;
  return s;
}

// The rotary tables: cos and sin of transformers' angles (llama_rope_angles), rounded to fp32 as
// LlamaCpu<float> rounds its own.
void upload_rope_tables(DeviceBuffer<float>& cos, DeviceBuffer<float>& sin,
                        const LlamaConfig& config, int max_seq, device::Device& gpu) {
  const auto angles = llama_rope_angles(config, max_seq);
  std::vector<float> c(angles.size()), s(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    c[i] = static_cast<float>(std::cos(angles[i]));
    s[i] = static_cast<float>(std::sin(angles[i]));
  }
  cos = DeviceBuffer<float>(gpu, c.size()), sin = DeviceBuffer<float>(gpu, s.size());
  gpu.copy_now(cos.data(), c.data(), c.size() * sizeof(float));
  gpu.copy_now(sin.data(), s.data(), s.size() * sizeof(float));
}

// Device values of T as fp32 on the host (16-bit: their bit patterns widened).
template <class T>
std::vector<float> download_as_float(device::Device& gpu, const T* data, size_t n) {
  std::vector<float> out(n);
  if constexpr (sizeof(T) == 4) {
    gpu.copy_now(out.data(), data, n * sizeof(float));
  } else {
    std::vector<uint16_t> bits(n);
    gpu.copy_now(bits.data(), data, n * sizeof(uint16_t));
    const bool f16 = storage_dtype<T>() == kernels::DType::F16;
    for (size_t i = 0; i < n; ++i)
      out[i] = f16 ? kernels::fp16_to_float(bits[i]) : kernels::bf16_to_float(bits[i]);
  }
  return out;
}

}  // namespace

template <class T>
LlamaCuda<T>::LlamaCuda(const LlamaConfig& config, int max_batch, int max_seq,
                        bool activation_checkpointing, cudaStream_t stream)
    // Checked before anything CUDA is made, so a bad config costs no GPU.
    : DecoderModel(config, llama_param_specs(checked_for_build(config, max_batch, max_seq)),
                   max_batch, max_seq, activation_checkpointing),
      layout_(config, specs_),
      forced_(attention_override()),
      stream_(stream),
      // The widest biased output: q's (Qwen2's q, k, v biases) or o's.
      blas_workspace_(decoder_blas_workspace(stream_.device(),
                                             std::max(size_t(config.num_heads) * config.head_dim,
                                                      size_t(config.hidden_size)))),
      blas_(workspace_of(blas_workspace_)),
      cudnn_workspace_(stream_.device(), stream_.stream()) {
  const size_t L = config.num_layers, C = config.hidden_size, F = config.intermediate_size;
  const size_t QD = size_t(config.num_heads) * config.head_dim,
               KVD = size_t(config.num_kv_heads) * config.head_dim;
  const size_t N = size_t(max_batch) * max_seq;
  upload_rope_tables(cos_, sin_, config_, max_seq, stream_.device());
  for (size_t l = 0; l <= L; ++l) residual_.emplace_back(stream_.device(), N * C);
  blocks_.resize(checkpointing_ ? 1 : L);
  for (auto& a : blocks_) {
    a.xn1 = device_array<T>(N * C), a.atty = device_array<T>(N * QD), a.res2 = device_array<T>(N * C);
    a.xn2 = device_array<T>(N * C), a.gate = device_array<T>(N * F), a.up = device_array<T>(N * F);
    a.h = device_array<T>(N * F), a.rstd1 = device_array<float>(N), a.rstd2 = device_array<float>(N);
  }
  inputs_ = device_array<int32_t>(N), targets_ = device_array<int32_t>(N), counted_on_device_ = device_array<int32_t>(1);
  grouped_rows_ = device_array<int32_t>(kc::grouped_rows_capacity(N));
  group_scratch_ = device_array<int32_t>(kc::grouped_rows_scratch(N));
  xf_ = device_array<T>(N * C), logits_ = device_array<T>(N * config.vocab_size);
  q_ = device_array<T>(N * QD), k_ = device_array<T>(N * KVD), v_ = device_array<T>(N * KVD);
  tmp_ = device_array<T>(N * C), dres_ = device_array<T>(N * C), dxn_ = device_array<T>(N * C);
  datty_ = device_array<T>(N * QD), dh_ = device_array<T>(N * F), dup_ = device_array<T>(N * F);
  rstdf_ = device_array<float>(N), lse_ = device_array<float>(N), losses_ = device_array<float>(N);
  norm_scratch_ = device_array<float>(kernels::column_sums_scratch_floats(N, C)), loss_ = device_array<float>(1);
  allocate_for(attention_for(max_batch, max_seq));
}

template <class T>
LlamaCuda<T>::~LlamaCuda() {
  stream_.device().make_current();  // the members' owners free on this thread
}

template <class T>
LlamaAttention LlamaCuda<T>::attention_for(int B, int Tn) {
  if (auto it = chosen_.find({B, Tn}); it != chosen_.end()) return it->second;
  bool cudnn = false;
#ifdef DSX_HAVE_CUDNN_ATTENTION
  if constexpr (sizeof(T) == 2) {
    if (forced_ != 1) {
      if (!cudnn_)
        cudnn_ = {new kc::CudnnAttention(stream_.get(),
                                         [this](size_t bytes) { return cudnn_workspace_.grow(bytes); }),
                  [](kc::CudnnAttention* p) { delete p; }};
      cudnn = cudnn_->supported(attention_shape(config_, B, Tn, storage_dtype<T>()));
    }
  }
#endif
  if (forced_ == 2 && !cudnn)
    throw Error(ErrorKind::Unsupported,
                "DSX_ATTENTION=cudnn, but cuDNN's fused attention cannot run this model's " +
                    std::string(kernels::dtype_name(storage_dtype<T>())) + " attention for batch " +
                    std::to_string(B) + " x " + std::to_string(Tn) + " (" +
                    std::to_string(config_.num_heads) + " heads, " +
                    std::to_string(config_.num_kv_heads) + " kv heads, head size " +
                    std::to_string(config_.head_dim) +
                    ") on this GPU and build; unset DSX_ATTENTION (or =own) for dsx's own kernels");
  const LlamaAttention path = cudnn ? LlamaAttention::Cudnn : LlamaAttention::Own;
  chosen_.emplace(std::make_pair(B, Tn), path);
  return path;
}

// Buffers are sized for the largest batch; a path's are made when a shape first takes it.
template <class T>
void LlamaCuda<T>::allocate_for(LlamaAttention path) {
  const size_t N = size_t(max_batch_) * max_seq_, NH = config_.num_heads;
  const size_t QD = NH * config_.head_dim, KVD = size_t(config_.num_kv_heads) * config_.head_dim;
  if (path == LlamaAttention::Own && !own_allocated_) {
    const size_t att = size_t(max_batch_) * NH * max_seq_ * max_seq_;
    for (auto& a : blocks_) a.qkv = device_array<T>(N * 3 * QD), a.att = device_array<float>(att);
    dqkv_ = device_array<T>(N * 3 * QD), dpre_ = device_array<float>(att);
    own_allocated_ = true;
  }
  if (path == LlamaAttention::Cudnn && !cudnn_allocated_) {
    for (auto& a : blocks_) {
      a.q = device_array<T>(N * QD), a.k = device_array<T>(N * KVD), a.v = device_array<T>(N * KVD);
      a.stats = device_array<float>(size_t(max_batch_) * NH * max_seq_);
    }
    cudnn_allocated_ = true;
  }
}

template <class T>
size_t LlamaCuda<T>::activation_bytes() const {
  size_t bytes = 0;
  auto add = [&](const auto& array) { bytes += array.size() * sizeof(*array.data()); };
  for (const auto& r : residual_) add(r);
  for (const auto& a : blocks_) {
    add(a.xn1), add(a.atty), add(a.res2), add(a.xn2), add(a.gate), add(a.up), add(a.h),
        add(a.rstd1);
    add(a.rstd2), add(a.qkv), add(a.att), add(a.q), add(a.k), add(a.v), add(a.stats);
  }
  add(inputs_), add(targets_), add(grouped_rows_), add(group_scratch_), add(counted_on_device_), add(cos_), add(sin_), add(xf_), add(logits_),
      add(q_), add(k_);
  add(v_), add(tmp_), add(dres_), add(dxn_), add(datty_), add(dh_), add(dup_), add(dqkv_),
      add(rstdf_), add(lse_);
  add(losses_), add(dpre_), add(norm_scratch_), add(loss_);
  return bytes;
}

template <class T>
void LlamaCuda<T>::init_params(void* flat, uint64_t seed) const {
  init_params_as<T>(LlamaCpu<float>(config_, 1, 1), flat, seed);
}

// atty from the projections: in q_, k_, v_ for the own kernels, in the block's q, k, v for cuDNN.
template <class T>
void LlamaCuda<T>::attention_forward(BlockActs& a) {
  const int NH = config_.num_heads, KV = config_.num_kv_heads, D = config_.head_dim;
  cudaStream_t s = stream_.get();
  if (path_ == LlamaAttention::Own) {
    kc::llama_qkv_pack_forward(a.qkv.data(), q_.data(), k_.data(), v_.data(), cos_.data(),
                               sin_.data(), B_, T_, NH, KV, D, s);
    kc::decoder_attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, NH * D, NH, s);
    return;
  }
  kc::llama_rope_forward(a.q.data(), cos_.data(), sin_.data(), B_, T_, NH, D, s);
  kc::llama_rope_forward(a.k.data(), cos_.data(), sin_.data(), B_, T_, KV, D, s);
#ifdef DSX_HAVE_CUDNN_ATTENTION
  cudnn_->forward(attention_shape(config_, B_, T_, storage_dtype<T>()), a.q.data(), a.k.data(),
                  a.v.data(), a.atty.data(), a.stats.data());
#endif
}

template <class T>
void LlamaCuda<T>::block_forward(BlockActs& a, T* res_out, const T* res_in, const BlockParams& p) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.hidden_size, F = config_.intermediate_size;
  const int QD = config_.num_heads * config_.head_dim,
            KVD = config_.num_kv_heads * config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const bool own = path_ == LlamaAttention::Own;
  const T* const no_bias = nullptr;
  cudaStream_t s = stream_.get();
  // res2 = input + o_proj(attention(rope(q, k), v)), q, k, v projections of rmsnorm(input)
  kc::llama_rmsnorm_forward(a.xn1.data(), a.rstd1.data(), res_in, p.ln1, N, C, eps, s);
  project_forward(Projection::q, own ? q_.data() : a.q.data(), a.xn1.data(), p.wq, p.bq, N, C, QD,
                  s);
  adapt_forward(Projection::q, own ? q_.data() : a.q.data(), a.xn1.data());
  project_forward(Projection::k, own ? k_.data() : a.k.data(), a.xn1.data(), p.wk, p.bk, N, C, KVD,
                  s);
  adapt_forward(Projection::k, own ? k_.data() : a.k.data(), a.xn1.data());
  project_forward(Projection::v, own ? v_.data() : a.v.data(), a.xn1.data(), p.wv, p.bv, N, C, KVD,
                  s);
  adapt_forward(Projection::v, own ? v_.data() : a.v.data(), a.xn1.data());
  attention_forward(a);
  project_forward(Projection::o, tmp_.data(), a.atty.data(), p.wo, p.bo, N, QD, C, s);
  adapt_forward(Projection::o, tmp_.data(), a.atty.data());
  kc::decoder_residual_forward(a.res2.data(), res_in, tmp_.data(), N * C, s);
  // output = res2 + down_proj(silu(gate_proj(x)) * up_proj(x)), x = rmsnorm(res2)
  kc::llama_rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.res2.data(), p.ln2, N, C, eps, s);
  project_forward(Projection::gate, a.gate.data(), a.xn2.data(), p.wg, no_bias, N, C, F, s);
  adapt_forward(Projection::gate, a.gate.data(), a.xn2.data());
  project_forward(Projection::up, a.up.data(), a.xn2.data(), p.wu, no_bias, N, C, F, s);
  adapt_forward(Projection::up, a.up.data(), a.xn2.data());
  kc::llama_swiglu_forward(a.h.data(), a.gate.data(), a.up.data(), N * F, s);
  project_forward(Projection::down, tmp_.data(), a.h.data(), p.wd, no_bias, N, F, C, s);
  adapt_forward(Projection::down, tmp_.data(), a.h.data());
  kc::decoder_residual_forward(res_out, a.res2.data(), tmp_.data(), N * C, s);
}

// dxn = d loss / d rmsnorm1(input), from dres2 = d loss / d res2. dq, dk, dv land in q_, k_, v_.
template <class T>
void LlamaCuda<T>::attention_backward(T* dxn, const T* dres2, BlockActs& a, const BlockParams& p,
                                      const BlockGrads& g) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.hidden_size, NH = config_.num_heads, KV = config_.num_kv_heads,
            D = config_.head_dim;
  const int QD = NH * D, KVD = KV * D;
  cudaStream_t s = stream_.get();
  project_backward(Projection::o, datty_.data(), g.wo, g.bo, dres2, a.atty.data(), p.wo, N, QD, C,
                   s);
  adapt_backward(Projection::o, datty_.data(), dres2, a.atty.data());
  if (path_ == LlamaAttention::Own) {
    kc::decoder_attention_backward(dqkv_.data(), dpre_.data(), datty_.data(), a.qkv.data(),
                                a.att.data(), B_, T_, QD, NH, s);
    kc::llama_qkv_pack_backward(q_.data(), k_.data(), v_.data(), dqkv_.data(), cos_.data(),
                                sin_.data(), B_, T_, NH, KV, D, s);
  } else {
#ifdef DSX_HAVE_CUDNN_ATTENTION
    cudnn_->backward(attention_shape(config_, B_, T_, storage_dtype<T>()), a.q.data(), a.k.data(),
                     a.v.data(), a.atty.data(), datty_.data(), a.stats.data(), q_.data(), k_.data(),
                     v_.data());
#endif
    kc::llama_rope_backward(q_.data(), cos_.data(), sin_.data(), B_, T_, NH, D, s);
    kc::llama_rope_backward(k_.data(), cos_.data(), sin_.data(), B_, T_, KV, D, s);
  }
  // Three projections of one input: their input gradients add up.
  project_backward(Projection::q, dxn, g.wq, g.bq, q_.data(), a.xn1.data(), p.wq, N, C, QD, s);
  adapt_backward(Projection::q, dxn, q_.data(), a.xn1.data());
  project_backward(Projection::k, tmp_.data(), g.wk, g.bk, k_.data(), a.xn1.data(), p.wk, N, C, KVD,
                   s);
  adapt_backward(Projection::k, tmp_.data(), k_.data(), a.xn1.data());
  kc::decoder_residual_forward(dxn, dxn, tmp_.data(), N * C, s);
  project_backward(Projection::v, tmp_.data(), g.wv, g.bv, v_.data(), a.xn1.data(), p.wv, N, C, KVD,
                   s);
  adapt_backward(Projection::v, tmp_.data(), v_.data(), a.xn1.data());
  kc::decoder_residual_forward(dxn, dxn, tmp_.data(), N * C, s);
}

// dres holds d loss / d (block output) on entry and d loss / d (block input) on return.
template <class T>
void LlamaCuda<T>::block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                                  const BlockGrads& g) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.hidden_size, F = config_.intermediate_size;
  T* const no_bias = nullptr;
  cudaStream_t s = stream_.get();
  float* scratch = norm_scratch_.data();
  // MLP: dres becomes d loss / d res2 (the residual plus the path through rmsnorm2).
  project_backward(Projection::down, dh_.data(), g.wd, no_bias, dres, a.h.data(), p.wd, N, F, C, s);
  adapt_backward(Projection::down, dh_.data(), dres, a.h.data());
  kc::llama_swiglu_backward(dh_.data() /* now dgate */, dup_.data(), dh_.data(), a.gate.data(),
                            a.up.data(), N * F, s);
  project_backward(Projection::gate, dxn_.data(), g.wg, no_bias, dh_.data(), a.xn2.data(), p.wg, N,
                   C, F, s);
  adapt_backward(Projection::gate, dxn_.data(), dh_.data(), a.xn2.data());
  project_backward(Projection::up, tmp_.data(), g.wu, no_bias, dup_.data(), a.xn2.data(), p.wu, N,
                   C, F, s);
  adapt_backward(Projection::up, tmp_.data(), dup_.data(), a.xn2.data());
  kc::decoder_residual_forward(dxn_.data(), dxn_.data(), tmp_.data(), N * C, s);
  kc::llama_rmsnorm_backward(dres, g.ln2, scratch, dxn_.data(), a.res2.data(), p.ln2,
                             a.rstd2.data(), N, C, s);
  // Attention: dres becomes d loss / d input.
  attention_backward(dxn_.data(), dres, a, p, g);
  kc::llama_rmsnorm_backward(dres, g.ln1, scratch, dxn_.data(), res_in, p.ln1, a.rstd1.data(), N, C,
                             s);
}

template <class T>
float LlamaCuda<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int Tn,
                            ParamAccess& access) {
  check_token_batch("Llama", inputs, targets, B, Tn, max_batch_, max_seq_, config_.vocab_size);
  stream_.device().make_current();  // the calling thread may not be the one that built the model
  B_ = B, T_ = Tn;
  path_ = attention_for(B, Tn);
  allocate_for(path_);
  const size_t N = size_t(B) * Tn;
  const int L = config_.num_layers, C = config_.hidden_size, V = config_.vocab_size;
  const bool tied = config_.tie_word_embeddings;
  has_targets_ = targets != nullptr;
  cudaStream_t s = stream_.get();
  stream_.device().copy(inputs_.data(), inputs, N * 4, stream_.stream());
  if (has_targets_) stream_.device().copy(targets_.data(), targets, N * 4, stream_.stream());

  access.acquire(0);  // tied: stays acquired until the head has run
  access.prefetch(1);
  kc::llama_embedding_forward(residual_[0].data(), inputs_.data(),
                              static_cast<const T*>(access.param(0)), N, C, s);
  if (!tied) access.release(0);
  blocks_forward(access, [&](int l) {
    GpuLayerSpan on_gpu(stream_.device(), stream_.stream(), "forward layer", l + 1);
    block_ = l;
    block_forward(acts_of(l), residual_[l + 1].data(), residual_[l].data(), llama_block_params<T>(layout_, access, l));
  });
  access.acquire(L + 1);
  const T* normw = static_cast<const T*>(access.param(layout_.norm_index()));
  kc::llama_rmsnorm_forward(xf_.data(), rstdf_.data(), residual_[L].data(), normw, N, C,
                            static_cast<float>(config_.rms_norm_eps), s);
  const T* head_w = static_cast<const T*>(access.param(layout_.head_index()));
  kc::decoder_matmul_forward(blas_, logits_.data(), xf_.data(), head_w, static_cast<const T*>(nullptr),
                          N, C, V, s);
  access.release(L + 1);
  if (tied) access.release(0);

  if (!has_targets_) return 0.0f;
  kc::decoder_crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets_.data(), N, V,
                                V, s);
  kc::decoder_mean_loss(loss_.data(), counted_on_device_.data(), losses_.data(), targets_.data(), N, s);
  if (keep_loss_) return std::numeric_limits<float>::quiet_NaN();
  // The caller wants the loss now: one float read back once the stream got there.
  float loss = 0.0f;
  stream_.stream().synchronize(kStreamWait);
  stream_.device().copy_now(&loss, loss_.data(), sizeof loss);
  return loss;
}

// Layer L+1 (and, tied, the embedding's gradient from the head): leaves d loss / d residual_[L]
// in dres_.
template <class T>
void LlamaCuda<T>::head_backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  const size_t N = size_t(B_) * T_;
  const int C = config_.hidden_size, V = config_.vocab_size;
  cudaStream_t s = stream_.get();
  const T* head_w = static_cast<const T*>(access.param(layout_.head_index()));
  T* dhead_w = static_cast<T*>(sink.grad(layout_.head_index()));
  // d(mean loss) = grad_scale / counted, with the count forward left on the GPU.
  kc::decoder_crossentropy_backward(logits_.data(), lse_.data(), targets_.data(), grad_scale,
                                    counted_on_device_.data(), N, V, V, s);
  kc::decoder_matmul_backward(blas_, dxn_.data(), dhead_w, static_cast<T*>(nullptr), logits_.data(),
                           xf_.data(), head_w, N, C, V, s);
  stream_.device().fill_zero(dres_.data(), N * C * sizeof(T), stream_.stream());
  kc::llama_rmsnorm_backward(
      dres_.data(), static_cast<T*>(sink.grad(layout_.norm_index())), norm_scratch_.data(), dxn_.data(),
      residual_[config_.num_layers].data(), static_cast<const T*>(access.param(layout_.norm_index())),
      rstdf_.data(), N, C, s);
}

// The embedding's rows summed per token in row order (no atomics), over the rows grouped by
// token on the GPU: the host never walks the tokens.
template <class T>
void LlamaCuda<T>::embedding_backward(GradSink& sink) {
  if (!sink.grad(0)) return;  // a frozen embedding (LoRA)
  const size_t N = size_t(B_) * T_;
  kc::group_rows_by_token(grouped_rows_.data(), group_scratch_.data(), inputs_.data(), N, stream_.get());
  kc::embedding_backward_grouped(static_cast<T*>(sink.grad(0)), dres_.data(), grouped_rows_.data(), N,
                                 config_.hidden_size, stream_.get());
}

template <class T>
void LlamaCuda<T>::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  if (!has_targets_)
    throw Error(
        ErrorKind::Usage,
        "Llama backward: the last forward had no targets, so there is no loss to differentiate");
  has_targets_ = false;  // the logits become their gradient below
  stream_.device().make_current();
  const int L = config_.num_layers;
  const bool tied = config_.tie_word_embeddings;
  // Gradients are final when the stream has run the kernels that write them: ZeRO on this
  // device orders its reads by an event; anyone else reads once the stream is done.
  const bool wait_for_stream = !sink.orders_after_device_work();
  auto ready = [&](int layer) {
    if (wait_for_stream) stream_.stream().synchronize(kStreamWait);
    sink.ready(layer);
    access.release(layer);
  };
  access.acquire(L + 1);
  if (tied) access.acquire(0);  // the head's weight is the embedding
  access.prefetch(L);
  head_backward(access, sink, grad_scale);
  ready(L + 1);
  blocks_backward(
      access,
      [&](int l) {
        GpuLayerSpan on_gpu(stream_.device(), stream_.stream(), "backward layer", l + 1);
        block_ = l;
        const BlockParams p = llama_block_params<T>(layout_, access, l);
        BlockActs& a = acts_of(l);
        if (checkpointing_) block_forward(a, tmp_.data() /* output not needed again */, residual_[l].data(), p);
        block_backward(dres_.data(), a, residual_[l].data(), p, llama_block_grads<T>(layout_, sink, l));
      },
      ready);
  if (!tied) access.acquire(0);
  embedding_backward(sink);
  ready(0);
}

// A projection of block block_: the cuBLASLt product, or the quantised base's (QLoRA), whose
// frozen weight has no gradient (its bias may train).
template <class T>
void LlamaCuda<T>::project_forward(Projection p, T* out, const T* inp, const T* w, const T* b,
                                   size_t N, int in, int out_dim, cudaStream_t s) {
  if (quantized_ && quantized_->quantized(block_, p))
    return quantized_->forward(block_, p, out, inp, b, N);
  kc::decoder_matmul_forward(blas_, out, inp, w, b, N, in, out_dim, s);
}

template <class T>
void LlamaCuda<T>::project_backward(Projection p, T* dinp, T* dw, T* db, const T* dout,
                                    const T* inp, const T* w, size_t N, int in, int out_dim,
                                    cudaStream_t s) {
  if (!quantized_ || !quantized_->quantized(block_, p))
    return kc::decoder_matmul_backward(blas_, dinp, dw, db, dout, inp, w, N, in, out_dim, s);
  if (dw)
    throw Error(ErrorKind::Internal,
                "Llama on the GPU: a gradient was asked of the quantised (frozen) weight of " +
                    std::string(projection_module(p)) + " in block " + std::to_string(block_));
  quantized_->backward_input(block_, p, dinp, dout, N);
  if (db) kc::decoder_bias_backward(blas_, db, dout, N, out_dim, s);
}

template <class T>
void LlamaCuda<T>::adapt_forward(Projection p, T* out, const T* inp) {
  if (adapters_) adapters_->forward(block_, p, out, inp, size_t(B_) * T_);
}

template <class T>
void LlamaCuda<T>::adapt_backward(Projection p, T* dinp, const T* dout, const T* inp) {
  if (adapters_) adapters_->backward(block_, p, dinp, dout, inp, size_t(B_) * T_);
}

template <class T>
std::vector<float> LlamaCuda<T>::logits() const {
  stream_.device().make_current();
  stream_.stream().synchronize(kStreamWait);
  return download_as_float(stream_.device(), logits_.data(), size_t(B_) * T_ * config_.vocab_size);
}

template class LlamaCuda<float>;
template class LlamaCuda<__nv_bfloat16>;
template class LlamaCuda<__half>;

}  // namespace dsx::models
