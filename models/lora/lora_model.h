// What every LoRA model is to the engine and the tools: a Model whose parameters are what trains
// (the adapters, and any base tensors trained in full), over a frozen base it reads through a
// ParamAccess; plus the two wrappers a LoRA model hands its base model so that the base reads
// frozen weights and trained ones alike and sends gradients for the trained ones only.
#pragma once

#include <vector>

#include "models/lora/lora_config.h"
#include "models/model.h"

namespace dsx::models {

class LoraModel : public Model {
 public:
  virtual const LoraConfig& lora() const = 0;
  virtual ParamAccess& frozen() = 0;
  virtual const ParamAccess& frozen() const = 0;
  // Elements of the frozen base model (all its parameters).
  virtual size_t base_numel() const = 0;
};

// `trained[i]`: the engine's index of base tensor i when it trains in full, else -1 (frozen).
class FrozenWithAdapters final : public ParamAccess {
 public:
  FrozenWithAdapters(ParamAccess& frozen, ParamAccess& adapters, const std::vector<int>& trained)
      : frozen_(frozen), adapters_(adapters), trained_(trained) {}
  void acquire(int layer) override { adapters_.acquire(layer), frozen_.acquire(layer); }
  void prefetch(int layer) override { adapters_.prefetch(layer), frozen_.prefetch(layer); }
  const void* param(size_t index) override {
    return trained_[index] >= 0 ? adapters_.param(trained_[index]) : frozen_.param(index);
  }
  void release(int layer) override { frozen_.release(layer), adapters_.release(layer); }

 private:
  ParamAccess& frozen_;
  ParamAccess& adapters_;
  const std::vector<int>& trained_;
};

// A frozen tensor's gradient is null, so the base model skips its products.
class NoFrozenGrads final : public GradSink {
 public:
  NoFrozenGrads(GradSink& adapters, const std::vector<int>& trained) : adapters_(adapters), trained_(trained) {}
  void* grad(size_t index) override { return trained_[index] >= 0 ? adapters_.grad(trained_[index]) : nullptr; }
  void ready(int layer) override { adapters_.ready(layer); }

 private:
  GradSink& adapters_;
  const std::vector<int>& trained_;
};

}  // namespace dsx::models
