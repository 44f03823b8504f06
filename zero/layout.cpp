// Layer-sorted flat order of parameters (see layout.h).
#include "zero/layout.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "dsx/error.h"

namespace dsx::zero {

ZeroLayout::ZeroLayout(const std::vector<ParamInfo>& params, int num_layers) : params_(params) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].layer < 0 || params[i].layer >= num_layers) {
      throw Error(ErrorKind::Internal, "parameter " + std::to_string(i) + " has layer " +
                                           std::to_string(params[i].layer) + " outside 0.." +
                                           std::to_string(num_layers - 1));
    }
  }
  order_.resize(params.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return params[a].layer < params[b].layer; });
  position_.resize(params.size());
  offsets_.assign(1, 0);
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    position_[order_[pos]] = pos;
    offsets_.push_back(offsets_.back() + params[order_[pos]].numel);
  }
  layer_first_.assign(static_cast<size_t>(num_layers) + 1, params.size());
  for (size_t pos = order_.size(); pos-- > 0;) layer_first_[params[order_[pos]].layer] = pos;
  for (int l = num_layers - 1; l >= 0; --l) layer_first_[l] = std::min(layer_first_[l], layer_first_[l + 1]);
}

std::vector<size_t> ZeroLayout::numels_in_order() const {
  std::vector<size_t> out;
  out.reserve(order_.size());
  for (size_t index : order_) out.push_back(params_[index].numel);
  return out;
}

}  // namespace dsx::zero
