// PartitionedNf4FrozenWeights (see partitioned_nf4_frozen_weights.h).
#include "engine/partitioned_nf4_frozen_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "dsx/error.h"
#include "models/lora/nf4_state_bytes.h"

namespace dsx::engine {

namespace {
// A gather waits behind ZeRO's queued reductions too; the communicator bounds each of them.
constexpr std::chrono::minutes kGatherTimeout{10};
}  // namespace

PartitionedNf4FrozenWeights::PartitionedNf4FrozenWeights(models::Nf4FrozenWeights& whole,
                                                         int num_blocks, comm::Communicator& comm)
    : specs_(whole.specs()), placement_(specs_.size()), comm_(comm) {
  // Dense tensors first in each layer, so that each starts on a float boundary of the gathered
  // words and param() can point into them; the NF4 states after them.
  std::map<std::string, int> tensor_named;
  for (const bool nf4 : {false, true}) {
    for (size_t i = 0; i < specs_.size(); ++i) {
      const kernels::Nf4Tensor* t = whole.quantized_tensor(i);
      if ((t != nullptr) != nf4) continue;
      Layer& l = layers_[specs_[i].layer];
      placement_[i] = {specs_[i].layer, l.bytes, -1};
      l.specs.push_back(i);
      if (!t) {
        l.bytes += specs_[i].numel * sizeof(float);
        continue;
      }
      placement_[i].tensor = static_cast<int>(tensors_.size());
      tensor_named[specs_[i].name] = placement_[i].tensor;
      tensors_.push_back(models::nf4_settings_of(*t));
      l.bytes += models::nf4_state_bytes(*t);
    }
  }
  by_block_.resize(static_cast<size_t>(num_blocks));
  for (int b = 0; b < num_blocks; ++b)
    for (int p = 0; p < models::kNumProjections; ++p) {
      const auto it = tensor_named.find(
          "model.layers." + std::to_string(b) + "." +
          models::projection_module(static_cast<models::Projection>(p)) + ".weight");
      by_block_[b][p] = it == tensor_named.end() ? -1 : it->second;
    }
  for (auto& [layer, l] : layers_) keep_share(l, whole);
}

// Lays out the layer's bytes whole, once, and keeps this rank's slice of them.
void PartitionedNf4FrozenWeights::keep_share(Layer& l, models::Nf4FrozenWeights& whole) {
  const size_t world = static_cast<size_t>(comm_.size()), rank = static_cast<size_t>(comm_.rank());
  const size_t words = (l.bytes + sizeof(float) - 1) / sizeof(float);
  l.share_words = (words + world - 1) / world;
  std::vector<uint8_t> bytes(l.share_words * world * sizeof(float), 0);
  size_t unpacked = 0;
  for (const size_t i : l.specs) {
    uint8_t* at = bytes.data() + placement_[i].at;
    if (const kernels::Nf4Tensor* t = whole.quantized_tensor(i)) {
      models::nf4_write_state(at, *t);
      unpacked += models::nf4_state_bytes(*t);
    } else {
      std::memcpy(at, whole.param(i), specs_[i].numel * sizeof(float));
    }
  }
  l.mine.resize(l.share_words);
  std::memcpy(l.mine.data(), bytes.data() + rank * l.share_words * sizeof(float),
              l.share_words * sizeof(float));
  largest_gathered_ = std::max(largest_gathered_, bytes.size() + unpacked);
}

void PartitionedNf4FrozenWeights::gather(Layer& l) {
  l.whole.assign(l.share_words * static_cast<size_t>(comm_.size()), 0.0f);
  // The words are bytes of codes and absmax, not numbers: an allgather moves them unchanged.
  if (!stream_) {
    comm_.allgather(l.mine.data(), l.whole.data(), l.share_words, kernels::DType::F32)->wait();
    return;
  }
  comm_.allgather_on(*device_, *stream_, l.mine.data(), l.whole.data(), l.share_words,
                     kernels::DType::F32);
  stream_->synchronize(kGatherTimeout);
}

void PartitionedNf4FrozenWeights::acquire(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) return;  // a layer without base weights
  Layer& l = it->second;
  gather(l);
  const auto* bytes = reinterpret_cast<const uint8_t*>(l.whole.data());
  for (const size_t i : l.specs)
    if (placement_[i].tensor >= 0)
      models::nf4_read_state(tensors_[placement_[i].tensor], bytes + placement_[i].at);
}

const void* PartitionedNf4FrozenWeights::param(size_t index) {
  const Placement& p = placement_.at(index);
  if (p.tensor >= 0) return nullptr;  // the model multiplies by an NF4 tensor through forward()
  const Layer& l = layers_.at(p.layer);
  if (l.whole.empty())
    throw Error(ErrorKind::Internal,
                "QLoRA base: " + specs_[index].name + " read before its layer was acquired");
  return l.whole.data() + p.at / sizeof(float);
}

void PartitionedNf4FrozenWeights::release(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) return;
  std::vector<float>().swap(it->second.whole);
  for (const size_t i : it->second.specs)
    if (placement_[i].tensor >= 0) models::nf4_drop_state(tensors_[placement_[i].tensor]);
}

const kernels::Nf4Tensor* PartitionedNf4FrozenWeights::tensor_of(int block,
                                                                 models::Projection p) const {
  const int i = by_block_.at(static_cast<size_t>(block))[static_cast<int>(p)];
  return i < 0 ? nullptr : &tensors_[static_cast<size_t>(i)];
}

namespace {
const kernels::Nf4Tensor& acquired(const kernels::Nf4Tensor* t, int block) {
  if (!t || t->packed.empty())
    throw Error(ErrorKind::Internal, "QLoRA base: block " + std::to_string(block) +
                                         "'s NF4 projection used before its layer was acquired");
  return *t;
}
}  // namespace

void PartitionedNf4FrozenWeights::forward(int block, models::Projection p, float* out,
                                          const float* inp, size_t N) {
  kernels::nf4_linear_forward(out, inp, acquired(tensor_of(block, p), block),
                              static_cast<int64_t>(N));
}

void PartitionedNf4FrozenWeights::backward_input(int block, models::Projection p, float* dinp,
                                                 const float* dout, size_t N) {
  kernels::nf4_linear_backward_input(dinp, dout, acquired(tensor_of(block, p), block),
                                     static_cast<int64_t>(N), false);
}

size_t PartitionedNf4FrozenWeights::share_bytes() const {
  size_t bytes = 0;
  for (const auto& [layer, l] : layers_) bytes += l.mine.size() * sizeof(float);
  for (const auto& t : tensors_)
    if (t.nested)
      bytes += (t.nested->code.size() + 1) * sizeof(float);  // the nested code and offset
  return bytes;
}

}  // namespace dsx::engine
