// ZeRO's own order of the model's parameters: sorted by layer (stable), so that every layer is a
// contiguous range of the flat buffer and gradients, which become final layer by layer from the
// last layer down, fill buckets that are contiguous ranges too. The model's order (its index in
// Model::params()) and ZeRO's position are mapped both ways.
#pragma once

#include <cstddef>
#include <vector>

namespace dsx::zero {

// What ZeRO needs to know of one parameter tensor.
struct ParamInfo {
  size_t numel = 0;
  int layer = 0;
  bool decay = true;  // weight decay applies
};

struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

class ZeroLayout {
 public:
  ZeroLayout(const std::vector<ParamInfo>& params, int num_layers);

  size_t num_params() const { return params_.size(); }
  int num_layers() const { return static_cast<int>(layer_first_.size()) - 1; }
  size_t numel() const { return offsets_.back(); }

  // Position of model parameter `index` in ZeRO's order, and back.
  size_t position(size_t index) const { return position_[index]; }
  size_t index_at(size_t position) const { return order_[position]; }
  const ParamInfo& info_at(size_t position) const { return params_[order_[position]]; }
  // Elements before the parameter at `position` in the flat buffer.
  size_t offset_at(size_t position) const { return offsets_[position]; }
  size_t flat_offset(size_t index) const { return offsets_[position_[index]]; }

  // Positions [first, last) of a layer's parameters and its range of the flat buffer.
  size_t layer_first(int layer) const { return layer_first_[layer]; }
  size_t layer_last(int layer) const { return layer_first_[layer + 1]; }
  Range layer_range(int layer) const { return {offsets_[layer_first(layer)], offsets_[layer_last(layer)]}; }
  size_t layer_numel(int layer) const { return layer_range(layer).size(); }

  // numel of every parameter in ZeRO's order (for FlatPartition / ShardedParams).
  std::vector<size_t> numels_in_order() const;

 private:
  std::vector<ParamInfo> params_;
  std::vector<size_t> order_;        // position -> model index
  std::vector<size_t> position_;     // model index -> position
  std::vector<size_t> offsets_;      // prefix sums in ZeRO order, size num_params + 1
  std::vector<size_t> layer_first_;  // first position of each layer, size num_layers + 1
};

}  // namespace dsx::zero
