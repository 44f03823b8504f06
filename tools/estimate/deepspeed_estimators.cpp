// The two estimators, transcribed formula by formula. Python evaluates `a * b * c` left to
// right, keeps products of ints exact and turns an int into a double only when it meets a
// float; every expression below does the same so the rounding happens at the same places.
#include "tools/estimate/deepspeed_estimators.h"

#include <algorithm>

namespace dsx::estimate {

namespace {

// Python's `int(x)` for the non-negative doubles here: truncation.
int64_t py_int(double x) { return static_cast<int64_t>(x); }

// Python's `total_params * max(int_term, float_term)`: max() returns its first argument unless
// the second is larger, and the product stays an exact int when the int wins.
double times_max(int64_t total_params, int64_t int_term, double float_term) {
  if (float_term > static_cast<double>(int_term))
    return static_cast<double>(total_params) * float_term;
  return static_cast<double>(total_params * int_term);
}

}  // namespace

ModelStateBytes deepspeed_zero2_model_states(int64_t total_params, int64_t gpus_per_node,
                                             int64_t nodes, bool cpu_offload,
                                             double buffer_factor) {
  const int64_t total_gpus = nodes * gpus_per_node;
  ModelStateBytes m;
  if (cpu_offload) {
    m.gpu = 2 * total_params;
    m.cpu_per_node = py_int(
        static_cast<double>(total_params * std::max<int64_t>(4 * total_gpus, 16)) * buffer_factor);
  } else {
    // 2 = 16-bit params; 18 = 16-bit grads 2 + fp32 grads 4 + fp32 params 4 + Adam m, v 8.
    m.gpu = 2 * total_params +
            py_int(static_cast<double>(18 * total_params) / static_cast<double>(total_gpus));
    m.cpu_per_node = py_int(static_cast<double>(total_params * 4 * gpus_per_node) * buffer_factor);
  }
  return m;
}

ModelStateBytes deepspeed_zero3_model_states(int64_t total_params, int64_t largest_layer_params,
                                             int64_t gpus_per_node, int64_t nodes, bool cpu_offload,
                                             bool cpu_offload_params, bool zero_init,
                                             double buffer_factor) {
  const int64_t total_gpus = nodes * gpus_per_node;
  const double gpus_factor = 1.0 / static_cast<double>(nodes);
  const int64_t largest_layer_memory = 4 * largest_layer_params;  // its 16-bit params + grads
  double cpu = 0;
  ModelStateBytes m;
  if (cpu_offload && cpu_offload_params) {
    m.gpu = largest_layer_memory;
    cpu = zero_init ? static_cast<double>(total_params * 18) * gpus_factor * buffer_factor
                    : times_max(total_params, 4 * gpus_per_node, 18 * gpus_factor) * buffer_factor;
  } else if (cpu_offload) {
    m.gpu = largest_layer_memory +
            py_int(static_cast<double>(2 * total_params) / static_cast<double>(total_gpus));
    cpu = zero_init ? static_cast<double>(total_params * 16) * gpus_factor * buffer_factor
                    : times_max(total_params, 4 * gpus_per_node, 16 * gpus_factor) * buffer_factor;
  } else {
    m.gpu = largest_layer_memory +
            py_int(static_cast<double>(18 * total_params) / static_cast<double>(total_gpus));
    cpu = zero_init ? static_cast<double>(largest_layer_params * 4 * gpus_per_node) * buffer_factor
                    : static_cast<double>(total_params * 4 * gpus_per_node) * buffer_factor;
  }
  m.cpu_per_node = py_int(cpu);
  return m;
}

}  // namespace dsx::estimate
