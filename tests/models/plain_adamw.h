// A plain AdamW loop for the model tests (the engine uses the fused kernels of kernels/): decay
// only where ParamSpec::decay says so; train_step is one whole step of a model on LocalParams.
#pragma once

#include <cmath>
#include <vector>

#include "models/local_params.h"
#include "models/model.h"

namespace dsx::test {

class PlainAdamW {
 public:
  PlainAdamW(size_t n, float lr, float weight_decay = 0.0f) : m_(n), v_(n), lr_(lr), wd_(weight_decay) {}
  void step(float* p, const float* g, const std::vector<models::ParamSpec>& specs) {
    ++t_;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float bc1 = 1 - std::pow(b1, static_cast<float>(t_)), bc2 = 1 - std::pow(b2, static_cast<float>(t_));
    for (const auto& s : specs) {
      float wd = s.decay ? wd_ : 0.0f;
      for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
        m_[i] = b1 * m_[i] + (1 - b1) * g[i];
        v_[i] = b2 * v_[i] + (1 - b2) * g[i] * g[i];
        p[i] -= lr_ * ((m_[i] / bc1) / (std::sqrt(v_[i] / bc2) + eps) + wd * p[i]);
      }
    }
  }
  // Forward and backward on (inputs, targets), then this step; returns the loss before it.
  float train_step(models::Model& model, models::LocalParams<float>& p, const int32_t* inputs,
                   const int32_t* targets, int B, int T) {
    const float loss = model.forward(inputs, targets, B, T, p);
    p.zero_grads();
    model.backward(p, p, 1.0f);
    step(p.params(), p.grads(), model.params());
    return loss;
  }

 private:
  std::vector<float> m_, v_;
  float lr_, wd_;
  long t_ = 0;
};

}  // namespace dsx::test
