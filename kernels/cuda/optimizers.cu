// Adam/AdamW, Lion, SGD and Adagrad on the GPU (kernels/cuda/optimizers.h): one grid-stride
// launch per flat buffer, each thread updating 4 consecutive elements with 16-byte loads when
// every buffer is aligned, with the element formulas of kernels/optimizer_math.h.
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optimizers.h"

namespace dsx::kernels::cuda {
namespace {

void check_step(const char* kernel, int64_t step) {
  if (step < 1)
    throw Error(ErrorKind::Internal, std::string(kernel) +
                                         ": step must be >= 1 (the first step is 1), got " +
                                         std::to_string(step));
}

bool all_vector_ok(std::initializer_list<const float*> buffers, const ParamCopy& copy) {
  for (const float* b : buffers)
    if (!vector_ok(DType::F32, b)) return false;
  return vector_ok(copy.dtype, copy.data);
}

template <int kCopy, AdamDecay kDecay>
struct AdamOp {
  AdamCoeffs c;
  const float* factor;  // device value times c.grad_factor; null: 1
  float* p;
  const float* g;
  float* m;
  float* v;
  void* copy;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> P = load_lanes<DType::F32, W>(p, i), G = load_lanes<DType::F32, W>(g, i);
    Lanes<W> M = load_lanes<DType::F32, W>(m, i), V = load_lanes<DType::F32, W>(v, i);
    AdamCoeffs cf = c;
    cf.grad_factor = GradFactor(c.grad_factor, factor).applied();
#pragma unroll
    for (int k = 0; k < W; ++k) adam_element<kDecay>(cf, P.v[k], G.v[k], M.v[k], V.v[k]);
    store_lanes<DType::F32, W>(p, i, P);
    store_lanes<DType::F32, W>(m, i, M);
    store_lanes<DType::F32, W>(v, i, V);
    store_copy<kCopy, W>(copy, i, P);
  }
};

template <int kCopy>
struct LionOp {
  LionHyper h;
  GradFactor grad_factor;
  float* p;
  const float* g;
  float* m;
  void* copy;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> P = load_lanes<DType::F32, W>(p, i), G = load_lanes<DType::F32, W>(g, i);
    Lanes<W> M = load_lanes<DType::F32, W>(m, i);
    const float factor = grad_factor.applied();
#pragma unroll
    for (int k = 0; k < W; ++k) lion_element(h, P.v[k], G.v[k], M.v[k], factor);
    store_lanes<DType::F32, W>(p, i, P);
    store_lanes<DType::F32, W>(m, i, M);
    store_copy<kCopy, W>(copy, i, P);
  }
};

template <int kCopy, SgdKind kKind, bool kNesterov>
struct SgdOp {
  SgdHyper h;
  GradFactor grad_factor;
  float* p;
  const float* g;
  float* buf;
  void* copy;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> P = load_lanes<DType::F32, W>(p, i), G = load_lanes<DType::F32, W>(g, i);
    Lanes<W> B{};
    if constexpr (kKind == SgdKind::Momentum) B = load_lanes<DType::F32, W>(buf, i);
    const float factor = grad_factor.applied();
#pragma unroll
    for (int k = 0; k < W; ++k) sgd_element<kKind, kNesterov>(h, P.v[k], G.v[k], B.v[k], factor);
    store_lanes<DType::F32, W>(p, i, P);
    if constexpr (kKind != SgdKind::Plain) store_lanes<DType::F32, W>(buf, i, B);
    store_copy<kCopy, W>(copy, i, P);
  }
};

template <int kCopy>
struct AdagradOp {
  AdagradHyper h;
  GradFactor grad_factor;
  float* p;
  const float* g;
  float* sum;
  void* copy;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> P = load_lanes<DType::F32, W>(p, i), G = load_lanes<DType::F32, W>(g, i);
    Lanes<W> S = load_lanes<DType::F32, W>(sum, i);
    const float factor = grad_factor.applied();
#pragma unroll
    for (int k = 0; k < W; ++k) adagrad_element(h, P.v[k], G.v[k], S.v[k], factor);
    store_lanes<DType::F32, W>(p, i, P);
    store_lanes<DType::F32, W>(sum, i, S);
    store_copy<kCopy, W>(copy, i, P);
  }
};

template <SgdKind kKind, bool kNesterov>
void launch_sgd(const SgdHyper& h, GradFactor grad_factor, float* param, const float* grad,
                float* buf, size_t count, const ParamCopy& copy, bool vec, cudaStream_t stream) {
  dispatch_copy(copy.data, copy.dtype, [&](auto kc) {
    SgdOp<decltype(kc)::value, kKind, kNesterov> op{h, grad_factor, param, grad, buf, copy.data};
    launch_elementwise("sgd_step", op, count, vec, stream);
  });
}

}  // namespace

void adam_step(const AdamHyper& hyper, int64_t step, GradFactor grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, size_t count, ParamCopy copy,
               cudaStream_t stream) {
  check_step("cuda::adam_step", step);
  DSX_TOUCHES(DSX_READS(grad_factor.device, sizeof(float)), DSX_WRITES(param, count * 4),
              DSX_READS(grad, count * 4), DSX_WRITES(exp_avg, count * 4),
              DSX_WRITES(exp_avg_sq, count * 4),
              DSX_WRITES(copy.data, count * dtype_size(copy.dtype)));
  AdamCoeffs c = adam_coeffs(hyper, step, grad_factor.host);
  bool vec = all_vector_ok({param, grad, exp_avg, exp_avg_sq}, copy);
  auto launch = [&](auto decay) {
    dispatch_copy(copy.data, copy.dtype, [&](auto kc) {
      AdamOp<decltype(kc)::value, decltype(decay)::value> op{
          c, grad_factor.device, param, grad, exp_avg, exp_avg_sq, copy.data};
      launch_elementwise("adam_step", op, count, vec, stream);
    });
  };
  switch (adam_decay(hyper)) {
    case AdamDecay::None:
      launch(std::integral_constant<AdamDecay, AdamDecay::None>{});
      break;
    case AdamDecay::L2:
      launch(std::integral_constant<AdamDecay, AdamDecay::L2>{});
      break;
    case AdamDecay::Decoupled:
      launch(std::integral_constant<AdamDecay, AdamDecay::Decoupled>{});
      break;
  }
}

void lion_step(const LionHyper& hyper, GradFactor grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy, cudaStream_t stream) {
  bool vec = all_vector_ok({param, grad, exp_avg}, copy);
  DSX_TOUCHES(DSX_READS(grad_factor.device, sizeof(float)), DSX_WRITES(param, count * 4),
              DSX_READS(grad, count * 4), DSX_WRITES(exp_avg, count * 4),
              DSX_WRITES(copy.data, count * dtype_size(copy.dtype)));
  dispatch_copy(copy.data, copy.dtype, [&](auto kc) {
    LionOp<decltype(kc)::value> op{hyper, grad_factor, param, grad, exp_avg, copy.data};
    launch_elementwise("lion_step", op, count, vec, stream);
  });
}

void sgd_step(const SgdHyper& hyper, int64_t step, GradFactor grad_factor, float* param,
              const float* grad, float* momentum_buffer, size_t count, ParamCopy copy,
              cudaStream_t stream) {
  check_step("cuda::sgd_step", step);
  DSX_TOUCHES(DSX_READS(grad_factor.device, sizeof(float)), DSX_WRITES(param, count * 4),
              DSX_READS(grad, count * 4), DSX_WRITES(momentum_buffer, count * 4),
              DSX_WRITES(copy.data, count * dtype_size(copy.dtype)));
  bool vec = all_vector_ok({param, grad, momentum_buffer}, copy);
  if (hyper.momentum == 0.0f)
    return launch_sgd<SgdKind::Plain, false>(hyper, grad_factor, param, grad, momentum_buffer,
                                             count, copy, vec, stream);
  if (!momentum_buffer && count)
    throw Error(ErrorKind::Internal, "cuda::sgd_step: momentum " + std::to_string(hyper.momentum) +
                                         " needs a momentum buffer, got none");
  bool first = step == 1;
  if (first && hyper.nesterov)
    launch_sgd<SgdKind::MomentumFirst, true>(hyper, grad_factor, param, grad, momentum_buffer,
                                             count, copy, vec, stream);
  else if (first)
    launch_sgd<SgdKind::MomentumFirst, false>(hyper, grad_factor, param, grad, momentum_buffer,
                                              count, copy, vec, stream);
  else if (hyper.nesterov)
    launch_sgd<SgdKind::Momentum, true>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                        copy, vec, stream);
  else
    launch_sgd<SgdKind::Momentum, false>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                         copy, vec, stream);
}

void adagrad_step(const AdagradHyper& hyper, GradFactor grad_factor, float* param,
                  const float* grad, float* sum_sq, size_t count, ParamCopy copy,
                  cudaStream_t stream) {
  bool vec = all_vector_ok({param, grad, sum_sq}, copy);
  DSX_TOUCHES(DSX_READS(grad_factor.device, sizeof(float)), DSX_WRITES(param, count * 4),
              DSX_READS(grad, count * 4), DSX_WRITES(sum_sq, count * 4),
              DSX_WRITES(copy.data, count * dtype_size(copy.dtype)));
  dispatch_copy(copy.data, copy.dtype, [&](auto kc) {
    AdagradOp<decltype(kc)::value> op{hyper, grad_factor, param, grad, sum_sq, copy.data};
    launch_elementwise("adagrad_step", op, count, vec, stream);
  });
}

}  // namespace dsx::kernels::cuda
