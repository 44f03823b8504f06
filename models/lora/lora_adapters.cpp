// LoRA adapters of a Llama-family model (see lora_adapters.h). The math of one branch is
// kernels/cpu/lora_linear.h; here: which projections, their tensors, init and dropout.
#include "models/lora/lora_adapters.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "dsx/error.h"
#include "kernels/cpu/lora_linear.h"
#include "kernels/lora_math.h"

namespace dsx::models {

namespace kc = dsx::kernels::cpu;

namespace {

// PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for llama, mistral and qwen2.
const std::vector<std::string> kDefaultTargets = {"q_proj", "v_proj"};

std::string module_path(int block, Projection p) {
  return "model.layers." + std::to_string(block) + "." + projection_module(p);
}

// (in, out) features of each projection.
std::array<std::array<int, 2>, kNumProjections> projection_shapes(const LlamaConfig& m) {
  const int C = m.hidden_size, F = m.intermediate_size, QD = m.num_heads * m.head_dim;
  const int KVD = m.num_kv_heads * m.head_dim;
  return {{{C, QD}, {C, KVD}, {C, KVD}, {QD, C}, {C, F}, {C, F}, {F, C}}};
}

// bias "all" / "lora_only" train the model's biases too: the same as "none" for a model without
// any (Llama, Mistral), not implemented where there are some (Qwen2, Llama's attention_bias).
void refuse_untrained_parts(const LoraConfig& c, const LlamaConfig& model) {
  if (c.bias != "none" && (model.qkv_bias || model.o_bias))
    throw Error(ErrorKind::Unsupported, c.source + ": bias \"" + c.bias +
                                            "\" trains biases beside the adapters, which dsx does not do yet; "
                                            "use \"none\"");
  if (!c.modules_to_save.empty())
    throw Error(ErrorKind::Unsupported, c.source + ": modules_to_save (" + c.modules_to_save.front() +
                                            ", ...) trains whole modules beside the adapters, which dsx does "
                                            "not do yet; remove it");
}

// Every listed target must name some projection: a typo would otherwise train nothing there.
void check_targets_match(const LoraConfig& c, int num_layers) {
  const auto matches = [&](const LoraConfig& one) {
    for (int p = 0; p < kNumProjections; ++p)
      if (one.targets(module_path(0, Projection(p)), {})) return true;
    for (int l = 1; l < num_layers; ++l)
      for (int p = 0; p < kNumProjections; ++p)
        if (one.targets(module_path(l, Projection(p)), {})) return true;
    return false;
  };
  const std::string known = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";
  if (c.target_regex && !matches(c))
    throw Error(ErrorKind::Config, c.source + ": target_modules regex '" + *c.target_regex +
                                       "' matches no module path (e.g. model.layers.0.self_attn.q_proj); the "
                                       "Llama family's adapted linears are " + known);
  for (const auto& name : c.target_names) {
    LoraConfig one;
    one.target_names = {name};
    if (!matches(one))
      throw Error(ErrorKind::Config, c.source + ": target_modules entry '" + name +
                                         "' matches no module of this model; the Llama family's are " + known +
                                         " (lm_head and embed_tokens take no adapter here)");
  }
}

}  // namespace

LoraAdapters::LoraAdapters(const LlamaConfig& model, const LoraConfig& config, int max_batch, int max_seq)
    : config_(config), scale_(static_cast<float>(config.scaling())), slots_(model.num_layers) {
  refuse_untrained_parts(config_, model);
  check_targets_match(config_, model.num_layers);
  if (config_.target_names.empty() && !config_.target_regex && !config_.all_linear)
    config_.target_names = kDefaultTargets;  // written out as such, so PEFT sees the same choice
  const auto shapes = projection_shapes(model);
  const size_t N = static_cast<size_t>(max_batch) * max_seq;
  const int r = config_.r;
  int widest = 0;
  for (int l = 0; l < model.num_layers; ++l) {
    for (int p = 0; p < kNumProjections; ++p) {
      const std::string path = module_path(l, Projection(p));
      if (!config_.targets(path, kDefaultTargets)) continue;
      Slot& s = slots_[l][p];
      s.in = shapes[p][0], s.out = shapes[p][1], s.a_index = static_cast<int>(specs_.size());
      s.u.resize(N * r);
      widest = std::max(widest, s.in);
      for (const char* ab : {"lora_A", "lora_B"}) {
        ParamSpec spec;
        spec.name = path + "." + ab + ".weight";
        spec.shape = ab[5] == 'A' ? std::vector<int64_t>{r, s.in} : std::vector<int64_t>{s.out, r};
        spec.layer = l + 1, spec.decay = true, spec.offset = numel_;
        spec.numel = static_cast<size_t>(spec.shape[0] * spec.shape[1]);
        numel_ += spec.numel;
        specs_.push_back(std::move(spec));
      }
    }
  }
  if (specs_.empty())
    throw Error(ErrorKind::Config, config_.source + ": target_modules selects no projection of this model");
  du_.resize(N * r);
  if (config_.dropout > 0) xdrop_.resize(N * widest), dx_.resize(N * widest);
}

// PEFT: A as nn.Linear's default (kaiming_uniform_, a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))) or
// N(0, 1/r) for "gaussian"; B zeros, so a fresh adapter changes nothing. init_lora_weights false
// leaves B at nn.Linear's default too (U(-1/sqrt(r), 1/sqrt(r))), a debugging aid.
void LoraAdapters::init(float* flat, uint64_t seed) const {
  std::mt19937_64 rng(seed);
  for (const auto& spec : specs_) {
    float* w = flat + spec.offset;
    const bool is_a = spec.name.ends_with("lora_A.weight");
    const double fan_in = static_cast<double>(spec.shape[1]);
    if (is_a && config_.init == LoraInit::gaussian) {
      std::normal_distribution<double> normal(0.0, 1.0 / config_.r);
      for (size_t i = 0; i < spec.numel; ++i) w[i] = static_cast<float>(normal(rng));
    } else if (is_a || config_.init == LoraInit::random) {
      const double bound = 1.0 / std::sqrt(fan_in);
      std::uniform_real_distribution<double> uniform(-bound, bound);
      for (size_t i = 0; i < spec.numel; ++i) w[i] = static_cast<float>(uniform(rng));
    } else {
      std::fill(w, w + spec.numel, 0.0f);
    }
  }
}

double LoraAdapters::flops(int64_t tokens) const {
  double macs = 0;
  for (const auto& block : slots_)
    for (const auto& s : block)
      if (s.a_index >= 0) macs += static_cast<double>(tokens) * config_.r * (s.in + s.out);
  return 2 * macs;
}

size_t LoraAdapters::activation_bytes() const {
  size_t n = xdrop_.capacity() + dx_.capacity() + du_.capacity();
  for (const auto& block : slots_)
    for (const auto& s : block) n += s.u.capacity();
  return n * sizeof(float);
}

void LoraAdapters::bind(ParamAccess* access, GradSink* sink, bool training) {
  access_ = access, sink_ = sink;
  if (sink == nullptr) {  // a forward: a new dropout mask
    dropout_on_ = training && config_.dropout > 0;
    ++forward_count_;
  }
}

LoraAdapters::Slot* LoraAdapters::slot(int block, Projection p) {
  Slot& s = slots_.at(block)[static_cast<int>(p)];
  return s.a_index < 0 ? nullptr : &s;
}

const LoraAdapters::Site* LoraAdapters::site(int block, Projection p) const {
  const Slot& s = slots_.at(block)[static_cast<int>(p)];
  return s.a_index < 0 ? nullptr : &s;
}

// The mask of kernels/lora_math.h: a recomputed forward (activation checkpointing), the backward
// and the CUDA adapters (lora_cuda.h) see the same one.
kernels::lora::DropoutMask LoraAdapters::mask(int block, Projection p) const {
  return kernels::lora::dropout_mask(forward_count_, block, static_cast<int>(p), config_.dropout);
}

const float* LoraAdapters::dropped(int block, Projection p, const float* inp, size_t N, int in) {
  if (!dropout_on_) return inp;
  const auto m = mask(block, p);
  const size_t n = N * static_cast<size_t>(in);
  for (size_t i = 0; i < n; ++i) xdrop_[i] = m.kept(i) ? inp[i] * m.inv_keep : 0.0f;
  return xdrop_.data();
}

void LoraAdapters::forward(int block, Projection p, float* out, const float* inp, size_t N) {
  Slot* s = slot(block, p);
  if (!s) return;
  const auto* A = static_cast<const float*>(access_->param(s->a_index));
  const auto* B = static_cast<const float*>(access_->param(s->a_index + 1));
  const float* x = dropped(block, p, inp, N, s->in);
  kc::lora_linear_forward(out, s->u.data(), x, A, B, N, s->in, config_.r, s->out, scale_);
}

void LoraAdapters::backward(int block, Projection p, float* dinp, const float* dout, const float* inp,
                            size_t N) {
  Slot* s = slot(block, p);
  if (!s) return;
  const auto* A = static_cast<const float*>(access_->param(s->a_index));
  const auto* B = static_cast<const float*>(access_->param(s->a_index + 1));
  auto* dA = static_cast<float*>(sink_->grad(s->a_index));
  auto* dB = static_cast<float*>(sink_->grad(s->a_index + 1));
  const float* x = dropped(block, p, inp, N, s->in);
  if (!dropout_on_) {
    kc::lora_linear_backward(dinp, dA, dB, du_.data(), dout, x, s->u.data(), A, B, N, s->in, config_.r, s->out,
                             scale_);
    return;
  }
  // Through the mask: dinp += dx' where kept (x' = x / keep there), 0 where dropped.
  const size_t n = N * static_cast<size_t>(s->in);
  std::fill(dx_.begin(), dx_.begin() + n, 0.0f);
  kc::lora_linear_backward(dx_.data(), dA, dB, du_.data(), dout, x, s->u.data(), A, B, N, s->in, config_.r, s->out,
                           scale_);
  const auto m = mask(block, p);
  for (size_t i = 0; i < n; ++i)
    if (m.kept(i)) dinp[i] += dx_[i] * m.inv_keep;
}

}  // namespace dsx::models
