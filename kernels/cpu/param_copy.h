// The optional 16-bit copy-out of the CPU optimizers (internal to kernels/cpu/): picks a store
// functor for the copy's dtype once per call, so the element loop has no branch on the dtype.
#pragma once

#include <cstdint>
#include <string>

#include "dsx/error.h"
#include "kernels/cpu/loops.h"
#include "kernels/optimizers.h"

namespace dsx::kernels::cpu {

// Calls f(store) where store(i, value) writes value to element i of the copy (or nothing).
template <class F>
void with_param_copy(const ParamCopy& copy, const F& f) {
  if (!copy.data) {
    f([](size_t, float) DSX_ALWAYS_INLINE {});
    return;
  }
  switch (copy.dtype) {
    case DType::F32:
      f([out = static_cast<float*>(copy.data)](size_t i, float v)
            DSX_ALWAYS_INLINE { out[i] = v; });
      break;
    case DType::F16:
      f([out = static_cast<uint16_t*>(copy.data)](size_t i, float v)
            DSX_ALWAYS_INLINE { out[i] = float_to_fp16(v); });
      break;
    case DType::BF16:
      f([out = static_cast<uint16_t*>(copy.data)](size_t i, float v)
            DSX_ALWAYS_INLINE { out[i] = float_to_bf16(v); });
      break;
  }
}

// The fused pass of an optimizer with one state tensor (Lion's exp_avg, Adagrad's sum):
// element(p, g, s) updates the parameter and the state in registers; both go back, and the
// parameter also to the copy.
template <class Element>
void step_with_one_state(const ParamCopy& copy, size_t count, float* param, const float* grad, float* state,
                         const Element& element) {
  with_param_copy(copy, [&](auto store) {
    for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i], s = state[i];
      element(p, grad[i], s);
      param[i] = p;
      state[i] = s;
      store(i, p);
    });
  });
}

// Steps count from 1; 0 or less is a bug in the caller.
inline void check_step(const char* kernel, int64_t step) {
  if (step < 1)
    throw Error(ErrorKind::Internal, std::string(kernel) +
                                         ": step must be >= 1 (the first step is 1), got " +
                                         std::to_string(step));
}

}  // namespace dsx::kernels::cpu
