// Connects a Model to ZeRO: the model asks for parameters and hands over gradients through the
// ParamAccess / GradSink seam (models/model.h); ZeroEngine answers both. Kept in engine/ so that
// zero/ needs nothing from models/.
#pragma once

#include <vector>

#include "models/model.h"
#include "zero/zero_engine.h"

namespace dsx::engine {

// The model's parameter list as ZeRO needs it.
std::vector<zero::ModelParam> zero_params_of(const models::Model& model);

class ZeroModelAccess final : public models::ParamAccess, public models::GradSink {
 public:
  explicit ZeroModelAccess(zero::ZeroEngine& zero) : zero_(zero) {}

  void acquire(int layer) override { zero_.acquire(layer); }
  void prefetch(int layer) override { zero_.prefetch(layer); }
  const void* param(size_t index) override { return zero_.param(index); }
  void release(int layer) override { zero_.release(layer); }
  void* grad(size_t index) override { return zero_.grad(index); }
  void ready(int layer) override { zero_.grad_ready(layer); }
  // ZeRO reads a layer's gradients on its own streams after an event on the compute stream.
  bool orders_after_device_work() const override { return true; }

 private:
  zero::ZeroEngine& zero_;
};

struct MicroStepResult {
  float loss = 0;               // the micro-batch's mean loss
  double forward_seconds = 0;
  double backward_seconds = 0;  // including the gradient reductions this micro-step waited for
};

// One micro-step of training through ZeRO: forward, backward with the loss scaled by
// `grad_scale` (loss_scale / gradient_accumulation_steps), and the gradient reductions this
// micro-step owes.
MicroStepResult train_micro_step(models::Model& model, zero::ZeroEngine& zero, const int32_t* inputs,
                       const int32_t* targets, int B, int T, bool boundary, float grad_scale);
// The same with the model's parameters and gradients reached through `access` / `sink` (a GPU
// model's DeviceBridge in front of ZeRO).
MicroStepResult train_micro_step(models::Model& model, zero::ZeroEngine& zero, models::ParamAccess& access,
                                 models::GradSink& sink, const int32_t* inputs, const int32_t* targets, int B, int T,
                                 bool boundary, float grad_scale);

}  // namespace dsx::engine
