// QLoRA's frozen base at ZeRO stage 3: the NF4 base (models/lora/nf4_frozen_weights.h)
// partitioned as stage 3 partitions parameters. Each layer's state, its dense fp32 tensors (norms,
// biases, embeddings, lm_head) and its NF4 tensors' packed codes and absmax (or double-quantised
// absmax), is one run of bytes; each rank keeps 1/world of it and gathers it whole only while the
// model computes that layer (acquire: an allgather; release: freed), as the dense base's
// engine/partitioned_frozen_weights.h does. The bytes travel as they are stored, 4 bits a weight:
// nothing is dequantised to be partitioned. No gradients and no optimizer state exist for them.
// Every rank acquires the layers in one order (the Model layer protocol); once order_on() names
// ZeRO's communication stream the gathers queue there behind ZeRO's own collectives.
#pragma once

#include <array>
#include <map>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"
#include "kernels/nf4_tensor.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::engine {

class PartitionedNf4FrozenWeights final : public models::ParamAccess,
                                          public models::QuantizedProjections {
 public:
  // Keeps this rank's share of `whole` (which the caller may then free).
  PartitionedNf4FrozenWeights(models::Nf4FrozenWeights& whole, int num_blocks,
                              comm::Communicator& comm);

  void order_on(device::Device& device, device::Stream& stream) {
    device_ = &device, stream_ = &stream;
  }

  void acquire(int layer) override;
  const void* param(size_t index) override;
  void release(int layer) override;

  bool quantized(int block, models::Projection p) const override {
    return tensor_of(block, p) != nullptr;
  }
  void forward(int block, models::Projection p, float* out, const float* inp, size_t N) override;
  void backward_input(int block, models::Projection p, float* dinp, const float* dout,
                      size_t N) override;

  // The NF4 tensor of a projection, its state present only while its layer is acquired.
  const kernels::Nf4Tensor* tensor_of(int block, models::Projection p) const;
  // Bytes this rank keeps between gathers: its shares and every tensor's settings.
  size_t share_bytes() const;
  // The most a gathered layer adds while acquired: its whole bytes plus its NF4 tensors unpacked.
  size_t largest_gathered_bytes() const { return largest_gathered_; }
  // What the rank holds at its peak: its shares and one layer gathered (the model computes one
  // at a time), as dsx estimate's stage-3 row counts it.
  size_t held_bytes() const override { return share_bytes() + largest_gathered_bytes(); }

 private:
  struct Placement {  // where spec i lies in its layer's bytes
    int layer = 0;
    size_t at = 0;    // byte offset in the layer's bytes
    int tensor = -1;  // index into tensors_ for an NF4 tensor, -1 for a dense one
  };
  struct Layer {
    size_t bytes = 0;           // the layer's state, unpadded
    size_t share_words = 0;     // 4-byte words per rank
    std::vector<float> mine;    // this rank's share
    std::vector<float> whole;   // gathered (share_words * world), empty when released
    std::vector<size_t> specs;  // its tensors, indices into specs_
  };
  void gather(Layer& l);
  void keep_share(Layer& l, models::Nf4FrozenWeights& whole);

  std::vector<models::ParamSpec> specs_;
  std::vector<Placement> placement_;
  std::vector<kernels::Nf4Tensor> tensors_;  // settings always, state while acquired
  std::vector<std::array<int, models::kNumProjections>> by_block_;  // index into tensors_, or -1
  std::map<int, Layer> layers_;
  size_t largest_gathered_ = 0;
  comm::Communicator& comm_;
  device::Device* device_ = nullptr;
  device::Stream* stream_ = nullptr;
};

}  // namespace dsx::engine
