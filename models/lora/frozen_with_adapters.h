// How a LoRA model hands its base model the two kinds of weights: an access that gathers the
// adapters' layer from the engine together with the frozen weights (the base reads only the
// frozen ones), and a sink that takes no gradient for a frozen weight (so the base skips those
// products) but passes each layer's ready() on, and on a GPU the engine's stream ordering.
#pragma once

#include "models/model.h"

namespace dsx::models {

class FrozenWithAdapters final : public ParamAccess {
 public:
  FrozenWithAdapters(ParamAccess& frozen, ParamAccess& adapters)
      : frozen_(frozen), adapters_(adapters) {}
  void acquire(int layer) override { adapters_.acquire(layer), frozen_.acquire(layer); }
  void prefetch(int layer) override { adapters_.prefetch(layer), frozen_.prefetch(layer); }
  const void* param(size_t index) override { return frozen_.param(index); }
  void release(int layer) override { frozen_.release(layer), adapters_.release(layer); }

 private:
  ParamAccess& frozen_;
  ParamAccess& adapters_;
};

class NoFrozenGrads final : public GradSink {
 public:
  explicit NoFrozenGrads(GradSink& adapters) : adapters_(adapters) {}
  void* grad(size_t) override { return nullptr; }
  void ready(int layer) override { adapters_.ready(layer); }
  bool orders_after_device_work() const override { return adapters_.orders_after_device_work(); }

 private:
  GradSink& adapters_;
};

}  // namespace dsx::models
