// How a LoRA model hands its base model the two kinds of weights: an access that gathers the
// adapters' layer from the engine together with the frozen weights (the base reads frozen and
// fully trained tensors alike), and a sink that takes no gradient for a frozen weight (so the base
// skips those products) but passes each layer's ready() on, and on a GPU the engine's stream
// ordering.
#pragma once

#include <vector>

#include "models/model.h"

namespace dsx::models {

// No base tensor trains in full.
inline const std::vector<int> kAllFrozen;

// `trained[i]`: the engine's index of base tensor i when it trains in full, else -1 (frozen);
// empty when none does.
class FrozenWithAdapters final : public ParamAccess {
 public:
  FrozenWithAdapters(ParamAccess& frozen, ParamAccess& adapters, const std::vector<int>& trained = kAllFrozen)
      : frozen_(frozen), adapters_(adapters), trained_(trained) {}
  void acquire(int layer) override { adapters_.acquire(layer), frozen_.acquire(layer); }
  void prefetch(int layer) override { adapters_.prefetch(layer), frozen_.prefetch(layer); }
  const void* param(size_t index) override {
    const int t = index < trained_.size() ? trained_[index] : -1;
    return t >= 0 ? adapters_.param(static_cast<size_t>(t)) : frozen_.param(index);
  }
  void release(int layer) override { frozen_.release(layer), adapters_.release(layer); }

 private:
  ParamAccess& frozen_;
  ParamAccess& adapters_;
  const std::vector<int>& trained_;
};

class NoFrozenGrads final : public GradSink {
 public:
  explicit NoFrozenGrads(GradSink& adapters, const std::vector<int>& trained = kAllFrozen)
      : adapters_(adapters), trained_(trained) {}
  void* grad(size_t index) override {
    const int t = index < trained_.size() ? trained_[index] : -1;
    return t >= 0 ? adapters_.grad(static_cast<size_t>(t)) : nullptr;
  }
  void ready(int layer) override { adapters_.ready(layer); }
  bool orders_after_device_work() const override { return adapters_.orders_after_device_work(); }

 private:
  GradSink& adapters_;
  const std::vector<int>& trained_;
};

}  // namespace dsx::models
