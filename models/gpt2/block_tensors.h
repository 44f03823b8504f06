// One GPT-2 block's twelve tensors as the CPU and CUDA models read them: the parameters from a
// ParamAccess (const T*), the gradients from a GradSink (T*), in GPT2Tensor order.
#pragma once

#include "models/gpt2/config.h"
#include "models/model.h"

namespace dsx::models {

template <class P>
struct GPT2BlockTensors {
  P ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

// `get(k)`: the address of tensor k of the block.
template <class P, class Get>
GPT2BlockTensors<P> gpt2_block_tensors(Get get) {
  return {get(kLn1w), get(kLn1b), get(kQkvw), get(kQkvb), get(kAttprojw), get(kAttprojb),
          get(kLn2w), get(kLn2b), get(kFcw),  get(kFcb),  get(kFcprojw),  get(kFcprojb)};
}

template <class T>
GPT2BlockTensors<const T*> gpt2_block_params(const GPT2Config& config, ParamAccess& access, int block) {
  return gpt2_block_tensors<const T*>(
      [&](GPT2Tensor k) { return static_cast<const T*>(access.param(gpt2_param_index(config, k, block))); });
}

template <class T>
GPT2BlockTensors<T*> gpt2_block_grads(const GPT2Config& config, GradSink& sink, int block) {
  return gpt2_block_tensors<T*>(
      [&](GPT2Tensor k) { return static_cast<T*>(sink.grad(gpt2_param_index(config, k, block))); });
}

}  // namespace dsx::models
