// The LoRA adapters of a Llama-family model: which block projections have one (the config's
// target_modules against Hugging Face's module paths), their A (r, in) and B (out, r) tensors as
// ParamSpecs in PEFT's names, their initialisation as PEFT's, and the branch itself run inside
// the model's blocks through the ProjectionAdapters seam, with PEFT's dropout on its input.
// The tensors live wherever the engine keeps parameters (ZeRO); each forward/backward is handed
// the ParamAccess and GradSink to find them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/llama/config.h"
#include "models/lora/lora_config.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

class LoraAdapters final : public ProjectionAdapters {
 public:
  // Adapters for every projection `config` targets; Error(Config) naming the target entry that
  // matches nothing. Layer numbers are the model's: block l is layer l + 1. (The base tensors
  // that bias / modules_to_save train are models/lora/trained_base_tensors.h's.)
  LoraAdapters(const LlamaConfig& model, const LoraConfig& config, int max_batch, int max_seq);

  const std::vector<ParamSpec>& specs() const { return specs_; }
  size_t numel() const { return numel_; }
  const LoraConfig& config() const { return config_; }
  // Whether the module at `module` (e.g. "model.layers.0.self_attn.q_proj") has an adapter.
  bool adapts(const std::string& module) const;
  // PEFT's tensor initialisation into a flat buffer in specs() order.
  void init(float* flat, uint64_t seed) const;
  double flops(int64_t tokens) const;  // forward multiply-adds x 2
  size_t activation_bytes() const;

  // The next forward/backward find the tensors here; `training` turns dropout on.
  void bind(ParamAccess* access, GradSink* sink, bool training);

  void forward(int block, Projection p, float* out, const float* inp, size_t N) override;
  void backward(int block, Projection p, float* dinp, const float* dout, const float* inp,
                size_t N) override;

 private:
  struct Slot {
    int a_index = -1;  // spec index of lora_A; lora_B follows it
    int in = 0, out = 0;
    std::vector<float> u;  // x @ A^T of the last forward, (N, r)
  };
  struct Mask {  // dropout's keep decision per element of one projection's input
    uint64_t key, threshold;
    float inv_keep;
    bool kept(size_t i) const;
  };
  Slot* slot(int block, Projection p);
  Mask mask(int block, Projection p) const;
  // The branch's input: inp itself, or inp with dropout's mask applied into scratch.
  const float* dropped(int block, Projection p, const float* inp, size_t N, int in);

  LoraConfig config_;
  float scale_ = 1;
  std::vector<std::array<Slot, kNumProjections>> slots_;  // per block
  std::vector<ParamSpec> specs_;
  size_t numel_ = 0;
  ParamAccess* access_ = nullptr;
  GradSink* sink_ = nullptr;
  bool dropout_on_ = false;
  uint64_t forward_count_ = 0;  // dropout masks differ per forward, equal on recompute
  std::vector<float> xdrop_, dx_, du_;
};

}  // namespace dsx::models
