// The LoRA adapters of a Llama-family or GPT-2 model: which block projections have one (the
// config's target_modules against Hugging Face's module paths), their A (r, in) and B (out, r) tensors as
// ParamSpecs in PEFT's names, their initialisation as PEFT's, and the branch itself run inside
// the model's blocks through the ProjectionAdapters seam, with PEFT's dropout on its input.
// The tensors live wherever the engine keeps parameters (ZeRO); each forward/backward is handed
// the ParamAccess and GradSink to find them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/lora_math.h"
#include "models/gpt2/config.h"
#include "models/llama/config.h"
#include "models/lora/lora_config.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

struct AdaptableModules;

class LoraAdapters final : public ProjectionAdapters, public Gpt2ProjectionAdapters {
 public:
  // Adapters for every projection `config` targets; Error(Config) naming the target entry that
  // matches nothing. Layer numbers are the model's: block l is layer l + 1. (The base tensors
  // that bias / modules_to_save train are models/lora/trained_base_tensors.h's.)
  LoraAdapters(const LlamaConfig& model, const LoraConfig& config, int max_batch, int max_seq);
  // GPT-2's Conv1D projections (transformer.h.N.attn.c_attn, ...): fan_in_fan_out is set, as PEFT
  // sets it; bias training and modules_to_save are refused (Error(Unsupported)).
  LoraAdapters(const GPT2Config& model, const LoraConfig& config, int max_batch, int max_seq);

  const std::vector<ParamSpec>& specs() const { return specs_; }
  size_t numel() const { return numel_; }
  const LoraConfig& config() const { return config_; }
  // Whether the module at `module` (e.g. "model.layers.0.self_attn.q_proj") has an adapter.
  bool adapts(const std::string& module) const;
  // PEFT's tensor initialisation into a flat buffer in specs() order.
  void init(float* flat, uint64_t seed) const;
  double flops(int64_t tokens) const;  // forward multiply-adds x 2
  size_t activation_bytes() const;

  // Where projection p of `block` has an adapter: lora_A's spec index (lora_B's follows) and the
  // projection's features; null where it has none. For the CUDA adapters (lora_cuda.h), which
  // run the same branches on the GPU.
  struct Site {
    int a_index = -1;
    int in = 0, out = 0;
  };
  const Site* site(int block, Projection p) const;
  float scale() const { return scale_; }
  int num_blocks() const { return static_cast<int>(slots_.size()); }

  // The next forward/backward find the tensors here; `training` turns dropout on (and counts
  // the forward: each training forward draws new masks).
  void bind(ParamAccess* access, GradSink* sink, bool training);
  // The masks continue after `training_forwards` training forwards (a resumed run's micro-steps),
  // so a resumed run drops what an uninterrupted one does.
  void resume_dropout_after(uint64_t training_forwards) { forward_count_ = training_forwards; }

  void forward(int block, Projection p, float* out, const float* inp, size_t N) override;
  void backward(int block, Projection p, float* dinp, const float* dout, const float* inp,
                size_t N) override;
  void forward(int block, Gpt2Projection p, float* out, const float* inp, size_t N) override;
  void backward(int block, Gpt2Projection p, float* dinp, const float* dout, const float* inp,
                size_t N) override;

 private:
  struct Slot : Site {
    std::vector<float> u;  // x @ A^T of the last forward, (N, r)
  };
  // `N` rows at most; slots are the family's projections by number.
  void build(const AdaptableModules& all, int num_blocks, size_t N);
  void slot_forward(int block, int p, float* out, const float* inp, size_t N);
  void slot_backward(int block, int p, float* dinp, const float* dout, const float* inp, size_t N);
  Slot* slot(int block, int p);
  kernels::lora::DropoutMask mask(int block, int p) const;
  // The branch's input: inp itself, or inp with dropout's mask applied into scratch.
  const float* dropped(int block, int p, const float* inp, size_t N, int in);

  LoraConfig config_;
  float scale_ = 1;
  std::vector<std::array<Slot, kNumProjections>> slots_;  // per block
  std::vector<ParamSpec> specs_;
  size_t numel_ = 0;
  ParamAccess* access_ = nullptr;
  GradSink* sink_ = nullptr;
  bool dropout_on_ = false;
  uint64_t forward_count_ = 0;  // training forwards: masks differ per forward, equal on recompute
  std::vector<float> xdrop_, dx_, du_;
};

}  // namespace dsx::models
