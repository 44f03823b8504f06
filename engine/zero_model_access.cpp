// Model <-> ZeRO glue (see zero_model_access.h).
#include "engine/zero_model_access.h"

#include <chrono>

#include "trace/trace.h"

namespace dsx::engine {

std::vector<zero::ModelParam> zero_params_of(const models::Model& model) {
  std::vector<zero::ModelParam> out;
  for (const models::ParamSpec& spec : model.params()) {
    out.push_back({zero::ParamInfo{spec.numel, spec.layer, spec.decay}, spec.offset});
  }
  return out;
}

MicroStepResult train_micro_step(models::Model& model, zero::ZeroEngine& zero, const int32_t* inputs,
                                 const int32_t* targets, int B, int T, bool boundary, float grad_scale) {
  ZeroModelAccess access(zero);
  return train_micro_step(model, zero, access, access, inputs, targets, B, T, boundary, grad_scale);
}

MicroStepResult train_micro_step(models::Model& model, zero::ZeroEngine& zero, models::ParamAccess& access,
                                 models::GradSink& sink, const int32_t* inputs, const int32_t* targets, int B, int T,
                                 bool boundary, float grad_scale) {
  using Clock = std::chrono::steady_clock;
  MicroStepResult r;
  zero.begin_micro_step(boundary);
  const auto t0 = Clock::now();
  {
    trace::Scope forward("forward", "phase");
    r.loss = model.forward(inputs, targets, B, T, access);
  }
  const auto t1 = Clock::now();
  {
    trace::Scope backward("backward", "phase");
    zero.begin_backward();
    model.backward(access, sink, grad_scale);
    zero.end_micro_step();
  }
  r.forward_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.backward_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace dsx::engine
