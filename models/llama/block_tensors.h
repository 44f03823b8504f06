// One Llama-family block's tensors as the CPU and CUDA models read them: the parameters from a
// ParamAccess (const T*), the gradients from a GradSink (T*), absent biases null; and where each
// tensor stands in the flat order of llama_param_specs (as models/gpt2/block_tensors.h for GPT-2).
#pragma once

#include <cstddef>
#include <vector>

#include "models/llama/config.h"
#include "models/model.h"

namespace dsx::models {

template <class P>
struct LlamaBlockTensors {
  P ln1, wq, bq, wk, bk, wv, bv, wo, bo, ln2, wg, wu, wd;
};

// The parameter indices of the embedding (0), the blocks, the final norm and the head.
class LlamaBlockLayout {
 public:
  // Found once from block 0's names in `specs` (llama_param_specs(config)).
  LlamaBlockLayout(const LlamaConfig& config, const std::vector<ParamSpec>& specs);

  size_t first_of(int block) const { return 1 + static_cast<size_t>(block) * per_block_; }
  size_t norm_index() const { return first_of(num_layers_); }
  size_t head_index() const { return tied_ ? 0 : norm_index() + 1; }  // tied: the embedding
  // The block's tensors, get(index) giving each present one's address.
  template <class P, class Get>
  LlamaBlockTensors<P> tensors(int block, Get get) const {
    const size_t base = first_of(block);
    auto at = [&](int rel) { return rel < 0 ? P(nullptr) : get(base + rel); };
    const auto& i = index_;
    return {at(i.ln1), at(i.wq), at(i.bq),  at(i.wk), at(i.bk), at(i.wv), at(i.bv),
            at(i.wo),  at(i.bo), at(i.ln2), at(i.wg), at(i.wu), at(i.wd)};
  }

 private:
  size_t per_block_ = 0;            // ParamSpecs per block
  LlamaBlockTensors<int> index_{};  // each tensor's place within a block's specs, -1 if absent
  int num_layers_ = 0;
  bool tied_ = false;
};

template <class T>
LlamaBlockTensors<const T*> llama_block_params(const LlamaBlockLayout& layout, ParamAccess& access,
                                               int block) {
  return layout.tensors<const T*>(block,
                                  [&](size_t k) { return static_cast<const T*>(access.param(k)); });
}

template <class T>
LlamaBlockTensors<T*> llama_block_grads(const LlamaBlockLayout& layout, GradSink& sink, int block) {
  return layout.tensors<T*>(block, [&](size_t k) { return static_cast<T*>(sink.grad(k)); });
}

}  // namespace dsx::models
