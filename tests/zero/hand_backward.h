// ZeRO driven by hand instead of by a model: parameters of awkward sizes in a few layers, and a
// "backward" that sets every gradient element of layer l to value(l), so that every number a
// test checks has a formula.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "zero/zero_engine.h"

namespace dsx::test {

// Parameters of `layers` layers, of awkward sizes (not multiples of any world size): per layer
// one of per_layer + l elements (decayed) and one of 7 (not decayed).
inline std::vector<zero::ModelParam> params_of(int layers, size_t per_layer) {
  std::vector<zero::ModelParam> out;
  size_t offset = 0;
  for (int l = 0; l < layers; ++l) {
    for (size_t n : {per_layer + static_cast<size_t>(l), size_t{7}}) {
      out.push_back({zero::ParamInfo{n, l, n > 7}, offset});
      offset += n;
    }
  }
  return out;
}

inline size_t total(const std::vector<zero::ModelParam>& ps) { return ps.back().model_offset + ps.back().info.numel; }

// The first half of a micro-step: its "forward", layer by layer from the bottom, each layer
// gathered (stage 3: with the next one prefetched) and released.
inline void forward(zero::ZeroEngine& z, int layers) {
  z.begin_micro_step(true);
  for (int l = 0; l < layers; ++l) {
    z.prefetch(l + 1);
    z.acquire(l);
    z.release(l);
  }
}

// One micro-step of "backward": layer by layer from the top, each gradient element += value(l).
template <class Value>
void backward(zero::ZeroEngine& z, const std::vector<zero::ModelParam>& ps, int layers, Value value,
              std::chrono::milliseconds compute = std::chrono::milliseconds(0)) {
  z.begin_micro_step(true);
  z.begin_backward();
  for (int l = layers - 1; l >= 0; --l) {
    z.acquire(l);
    if (compute.count() > 0) std::this_thread::sleep_for(compute);  // the layer's backward math
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].info.layer != l) continue;
      float* g = static_cast<float*>(z.grad(i));
      for (size_t k = 0; k < ps[i].info.numel; ++k) g[k] += value(l);
    }
    z.release(l);
    z.grad_ready(l);
  }
  z.end_micro_step();
}

// SGD with lr 1 and no momentum: a step moves every parameter by minus its averaged gradient.
inline zero::ZeroOptions sgd_options(int stage) {
  zero::ZeroOptions o;
  o.stage = stage;
  o.reduce_bucket_size = 500;
  o.optimizer.type = zero::OptimizerType::Sgd;
  o.optimizer.sgd.lr = 1.0f;
  o.comm_timeout = std::chrono::seconds(30);
  return o;
}

}  // namespace dsx::test
