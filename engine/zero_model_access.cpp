// Model <-> ZeRO glue (see zero_model_access.h).
#include "engine/zero_model_access.h"

namespace dsx::engine {

std::vector<zero::ModelParam> zero_params_of(const models::Model& model) {
  std::vector<zero::ModelParam> out;
  for (const models::ParamSpec& spec : model.params()) {
    out.push_back({zero::ParamInfo{spec.numel, spec.layer, spec.decay}, spec.offset});
  }
  return out;
}

float train_micro_step(models::Model& model, zero::ZeroEngine& zero, const int32_t* inputs,
                       const int32_t* targets, int B, int T, bool boundary, float grad_scale) {
  ZeroModelAccess access(zero);
  zero.begin_micro_step(boundary);
  const float loss = model.forward(inputs, targets, B, T, access);
  zero.begin_backward();
  model.backward(access, access, grad_scale);
  zero.end_micro_step();
  return loss;
}

}  // namespace dsx::engine
