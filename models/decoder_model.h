// What the four decoder models (GPT2Cpu, GPT2Cuda, LlamaCpu, LlamaCuda) hold and answer alike:
// the config, the parameter list, the largest batch they were built for, and the sizes of the
// last forward. The layers, the layer protocol and the element type stay with each model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

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

  Config config_;
  std::vector<ParamSpec> specs_;
  size_t num_params_ = 0;
  int max_batch_, max_seq_;
  bool checkpointing_;  // keep only each block's input; backward recomputes the block

  int B_ = 0, T_ = 0;         // sizes of the last forward
  size_t counted_ = 0;        // its targets that count in the loss
  bool has_targets_ = false;  // it had targets (and backward has not consumed them yet)
};

}  // namespace dsx::models
