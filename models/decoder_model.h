// What the four decoder models (GPT2Cpu, GPT2Cuda, LlamaCpu, LlamaCuda) hold and answer alike:
// the config, the parameter list, the largest batch they were built for, and the sizes of the
// last forward. The layers, the layer protocol and the element type stay with each model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dsx/error.h"
#include "models/model.h"

namespace dsx::models {

// Flops: the family's forward flop count (models/<family>/flops.h).
template <class Config, double (*Flops)(const Config&, int64_t, int64_t)>
class DecoderModel : public Model {
 public:
  const std::vector<ParamSpec>& params() const final { return specs_; }
  size_t num_params() const final { return num_params_; }
  int num_layers() const final { return config_.num_layers + 2; }  // embedding, blocks, head
  int vocab_size() const final { return config_.vocab_size; }
  int max_seq_len() const final { return max_seq_; }
  double forward_flops(int64_t rows, int64_t tokens) const final {
    return Flops(config_, rows, tokens);
  }
  const Config& config() const { return config_; }

 protected:
  DecoderModel(const Config& config, std::vector<ParamSpec> specs, int max_batch, int max_seq,
               bool activation_checkpointing)
      : config_(config),
        specs_(std::move(specs)),
        max_batch_(max_batch),
        max_seq_(max_seq),
        checkpointing_(activation_checkpointing) {
    for (const auto& s : specs_) num_params_ += s.numel;
  }

  // The layer protocol's walks through the blocks (layers 1..L, model.h). Forward, the first
  // first: block l's parameters acquired, the next block's prefetched, released after block(l).
  template <class Block>
  void blocks_forward(ParamAccess& access, const Block& block) const {
    for (int l = 0; l < config_.num_layers; ++l) {
      access.acquire(l + 1);
      access.prefetch(l + 2);
      block(l);
      access.release(l + 1);
    }
  }
  // Backward, the last first: block l's parameters acquired, the previous block's prefetched,
  // and done(l + 1) after block(l) to hand the gradients over and release the parameters.
  template <class Block, class Done>
  void blocks_backward(ParamAccess& access, const Block& block, const Done& done) const {
    for (int l = config_.num_layers - 1; l >= 0; --l) {
      access.acquire(l + 1);
      access.prefetch(l);
      block(l);
      done(l + 1);
    }
  }

  // The token ids of a batch (inputs and targets), copied in at each forward.
  size_t token_id_bytes() const { return 2 * static_cast<size_t>(max_batch_) * max_seq_ * sizeof(int32_t); }

  Config config_;
  std::vector<ParamSpec> specs_;
  size_t num_params_ = 0;
  int max_batch_, max_seq_;
  bool checkpointing_;  // keep only each block's input; backward recomputes the block

  int B_ = 0, T_ = 0;         // sizes of the last forward
  size_t counted_ = 0;        // its targets that count in the loss
  bool has_targets_ = false;  // it had targets (and backward has not consumed them yet)
};

// A CPU model's parameter type: F32; the float64 instantiation is a test reference the engine
// cannot hold.
template <class T>
kernels::DType cpu_param_dtype(const char* family) {
  if constexpr (sizeof(T) != 4)
    throw Error(ErrorKind::Unsupported, std::string("the float64 ") + family + " is a test reference with no engine dtype");
  return kernels::DType::F32;
}

// The bytes a CPU model's activation vectors hold (by capacity).
template <class T>
size_t capacity_bytes(const std::vector<const std::vector<T>*>& vectors) {
  size_t elements = 0;
  for (const auto* v : vectors) elements += v->capacity();
  return elements * sizeof(T);
}

}  // namespace dsx::models
