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

// Every projection a model could adapt, in block order, with PEFT's default targets for it
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
struct AdaptableModule {
  int block, slot;
  std::string path;
  int in, out;
};
struct AdaptableModules {
  std::vector<AdaptableModule> modules;
  std::vector<std::string> default_targets;
  std::string names;  // for messages
};

namespace {

AdaptableModules llama_modules(const LlamaConfig& m) {
  const int C = m.hidden_size, F = m.intermediate_size, QD = m.num_heads * m.head_dim;
  const int KVD = m.num_kv_heads * m.head_dim;
  const int shapes[kNumProjections][2] = {{C, QD}, {C, KVD}, {C, KVD}, {QD, C}, {C, F}, {C, F}, {F, C}};
  AdaptableModules out{{}, {"q_proj", "v_proj"},
                       "the Llama family's are q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"};
  for (int l = 0; l < m.num_layers; ++l)
    for (int p = 0; p < kNumProjections; ++p)
      out.modules.push_back({l, p, "model.layers." + std::to_string(l) + "." + projection_module(Projection(p)),
                             shapes[p][0], shapes[p][1]});
  return out;
}

// transformers' GPT2LMHeadModel paths (transformer.h.N...); (in, out) as the Conv1D computes.
AdaptableModules gpt2_modules(const GPT2Config& m) {
  const int C = m.channels;
  const int shapes[kNumGpt2Projections][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
  AdaptableModules out{{}, {"c_attn"}, "GPT-2's are c_attn, c_proj (attn and mlp), c_fc"};
  for (int l = 0; l < m.num_layers; ++l)
    for (int p = 0; p < kNumGpt2Projections; ++p)
      out.modules.push_back({l, p, "transformer.h." + std::to_string(l) + "." + gpt2_projection_module(Gpt2Projection(p)),
                             shapes[p][0], shapes[p][1]});
  return out;
}

// Every listed target must name some projection: a typo would otherwise train nothing there.
void check_targets_match(const LoraConfig& c, const AdaptableModules& all) {
  const auto matches = [&](const LoraConfig& one) {
    return std::any_of(all.modules.begin(), all.modules.end(),
                       [&](const AdaptableModule& m) { return one.targets(m.path, {}); });
  };
  if (c.target_regex && !matches(c))
    throw Error(ErrorKind::Config, c.source + ": target_modules regex '" + *c.target_regex +
                                       "' matches no module path (e.g. " + all.modules.front().path + "); " +
                                       all.names);
  for (const auto& name : c.target_names) {
    LoraConfig one;
    one.target_names = {name};
    if (!matches(one))
      throw Error(ErrorKind::Config, c.source + ": target_modules entry '" + name + "' matches no module of this model; " +
                                         all.names + " (the head and the embeddings take no adapter here)");
  }
}

}  // namespace

LoraAdapters::LoraAdapters(const LlamaConfig& model, const LoraConfig& config, int max_batch, int max_seq)
    : config_(config), scale_(static_cast<float>(config.scaling())) {
  if (config_.fan_in_fan_out)
    throw Error(ErrorKind::Config, config_.source + ": key 'fan_in_fan_out' is for GPT-2's Conv1D layers; the "
                                                    "Llama family needs false");
  build(llama_modules(model), model.num_layers, static_cast<size_t>(max_batch) * max_seq);
}

LoraAdapters::LoraAdapters(const GPT2Config& model, const LoraConfig& config, int max_batch, int max_seq)
    : config_(config), scale_(static_cast<float>(config.scaling())) {
  if (config_.bias != "none" || !config_.modules_to_save.empty())
    throw Error(ErrorKind::Unsupported, config_.source + ": bias \"" + config_.bias +
                                            "\" and modules_to_save train GPT-2 tensors in full, which dsx does not do "
                                            "yet; use bias \"none\" and no modules_to_save");
  config_.fan_in_fan_out = true;  // PEFT forces it on for Conv1D and saves it so
  build(gpt2_modules(model), model.num_layers, static_cast<size_t>(max_batch) * max_seq);
}

void LoraAdapters::build(const AdaptableModules& all, int num_blocks, size_t N) {
  check_targets_match(config_, all);
  if (config_.target_names.empty() && !config_.target_regex && !config_.all_linear)
    config_.target_names = all.default_targets;  // written out as such, so PEFT sees the same choice
  slots_.resize(num_blocks);
  const int r = config_.r;
  int widest = 0;
  for (const AdaptableModule& m : all.modules) {
    if (!config_.targets(m.path, all.default_targets)) continue;
    Slot& s = slots_[m.block][m.slot];
    s.in = m.in, s.out = m.out, s.a_index = static_cast<int>(specs_.size());
    s.u.resize(N * r);
    widest = std::max(widest, s.in);
    for (const char* ab : {"lora_A", "lora_B"}) {
      ParamSpec spec;
      spec.name = m.path + "." + ab + ".weight";
      spec.shape = ab[5] == 'A' ? std::vector<int64_t>{r, s.in} : std::vector<int64_t>{s.out, r};
      spec.layer = m.block + 1, spec.decay = true, spec.offset = numel_;
      spec.numel = static_cast<size_t>(spec.shape[0] * spec.shape[1]);
      numel_ += spec.numel;
      specs_.push_back(std::move(spec));
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

bool LoraAdapters::adapts(const std::string& module) const {
  const std::string a = module + ".lora_A.weight";
  return std::any_of(specs_.begin(), specs_.end(), [&](const ParamSpec& s) { return s.name == a; });
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
  if (sink == nullptr) {  // a forward: a training one draws a new dropout mask
    dropout_on_ = training && config_.dropout > 0;
    if (training) ++forward_count_;
  }
}

LoraAdapters::Slot* LoraAdapters::slot(int block, int p) {
  Slot& s = slots_.at(block)[p];
  return s.a_index < 0 ? nullptr : &s;
}

const LoraAdapters::Site* LoraAdapters::site(int block, Projection p) const {
  const Slot& s = slots_.at(block)[static_cast<int>(p)];
  return s.a_index < 0 ? nullptr : &s;
}

// The mask of kernels/lora_math.h: a recomputed forward (activation checkpointing), the backward
// and the CUDA adapters (lora_cuda.h) see the same one.
kernels::lora::DropoutMask LoraAdapters::mask(int block, int p) const {
  return kernels::lora::dropout_mask(forward_count_, block, p, config_.dropout);
}

const float* LoraAdapters::dropped(int block, int p, const float* inp, size_t N, int in) {
  if (!dropout_on_) return inp;
  const auto m = mask(block, p);
  const size_t n = N * static_cast<size_t>(in);
  for (size_t i = 0; i < n; ++i) xdrop_[i] = m.kept(i) ? inp[i] * m.inv_keep : 0.0f;
  return xdrop_.data();
}

void LoraAdapters::forward(int block, Projection p, float* out, const float* inp, size_t N) {
  slot_forward(block, static_cast<int>(p), out, inp, N);
}

void LoraAdapters::forward(int block, Gpt2Projection p, float* out, const float* inp, size_t N) {
  slot_forward(block, static_cast<int>(p), out, inp, N);
}

void LoraAdapters::backward(int block, Projection p, float* dinp, const float* dout, const float* inp, size_t N) {
  slot_backward(block, static_cast<int>(p), dinp, dout, inp, N);
}

void LoraAdapters::backward(int block, Gpt2Projection p, float* dinp, const float* dout, const float* inp,
                            size_t N) {
  slot_backward(block, static_cast<int>(p), dinp, dout, inp, N);
}

void LoraAdapters::slot_forward(int block, int p, float* out, const float* inp, size_t N) {
  Slot* s = slot(block, p);
  if (!s) return;
  const auto* A = static_cast<const float*>(access_->param(s->a_index));
  const auto* B = static_cast<const float*>(access_->param(s->a_index + 1));
  const float* x = dropped(block, p, inp, N, s->in);
  kc::lora_linear_forward(out, s->u.data(), x, A, B, N, s->in, config_.r, s->out, scale_);
}

void LoraAdapters::slot_backward(int block, int p, float* dinp, const float* dout, const float* inp, size_t N) {
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
