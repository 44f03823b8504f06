// DevicePartitionedFrozenWeights (see device_partitioned_frozen_weights.h).
#include "engine/device_partitioned_frozen_weights.h"

#include <algorithm>
#include <string>

#include "dsx/error.h"
#include "engine/partitioned_frozen_weights.h"  // frozen_layer_ranges
#include "kernels/mixed_precision.h"

namespace dsx::engine {

DevicePartitionedFrozenWeights::DevicePartitionedFrozenWeights(
    const std::vector<models::ParamSpec>& specs, const std::vector<float>& flat,
    kernels::DType dtype, device::Device& device, comm::Communicator& comm)
    : specs_(specs), dtype_(dtype), device_(device), comm_(comm) {
  const size_t world = static_cast<size_t>(comm_.size()), rank = static_cast<size_t>(comm_.rank());
  for (const auto& [layer, range] : frozen_layer_ranges(specs_, flat.size())) {
    Layer& l = layers_[layer];
    l.begin = range.begin, l.end = range.end;
    l.share = (l.end - l.begin + world - 1) / world;
    std::vector<float> mine(l.share, 0.0f);  // the last rank's tail is padding
    const size_t first = l.begin + rank * l.share;
    for (size_t i = 0; i < l.share && first + i < l.end; ++i) mine[i] = flat[first + i];
    std::vector<uint8_t> stored(bytes(l.share));
    kernels::cast(kernels::DType::F32, mine.data(), dtype_, stored.data(), l.share);
    l.mine = device::OwnedMemory(device_, device::OwnedMemory::Kind::Device, stored.size());
    device_.copy_now(l.mine.get(), stored.data(), stored.size());
    l.gathered = device_.create_event();
  }
}

DevicePartitionedFrozenWeights::~DevicePartitionedFrozenWeights() {
  for (auto& [layer, l] : layers_) {
    try {
      release(layer);
    } catch (const Error&) {
      // A failed device keeps the memory until the process ends; nothing else can be done here.
    }
  }
}

// The share goes into its place in the layer's buffer, and the allgather fills the rest in place.
void DevicePartitionedFrozenWeights::start_gather(Layer& l) {
  device::Stream& stream = gather_stream_ ? *gather_stream_ : device_.compute_stream();
  const size_t world = static_cast<size_t>(comm_.size()), rank = static_cast<size_t>(comm_.rank());
  auto* whole = static_cast<uint8_t*>(
      device_.allocate(bytes(l.share * world), device::Placement::Communicated, stream));
  uint8_t* mine = whole + bytes(l.share * rank);
  device_.copy(mine, l.mine.get(), bytes(l.share), stream);
  comm_.allgather_on(device_, stream, mine, whole, l.share, dtype_);
  stream.record(*l.gathered);
  l.whole = whole, l.waited = false;
}

void DevicePartitionedFrozenWeights::order_compute_after(Layer& l) {
  if (l.waited) return;
  device_.compute_stream().wait(*l.gathered);
  l.waited = true;
}

void DevicePartitionedFrozenWeights::prefetch(int layer) {
  auto it = layers_.find(layer);
  if (it != layers_.end() && !it->second.whole) start_gather(it->second);
}

void DevicePartitionedFrozenWeights::acquire(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) return;  // a layer without base weights
  if (!it->second.whole) start_gather(it->second);
  order_compute_after(it->second);
}

const void* DevicePartitionedFrozenWeights::param(size_t index) {
  const models::ParamSpec& s = specs_.at(index);
  const Layer& l = layers_.at(s.layer);
  if (!l.whole)
    throw Error(ErrorKind::Internal,
                "frozen base: " + s.name + " read before its layer was acquired");
  return l.whole + bytes(s.offset - l.begin);
}

// After the compute stream's work so far, which is what read the layer.
void DevicePartitionedFrozenWeights::release(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end() || !it->second.whole) return;
  Layer& l = it->second;
  order_compute_after(l);  // a prefetched layer never acquired: its gather lands first
  device_.free(l.whole, bytes(l.share * static_cast<size_t>(comm_.size())),
               device_.compute_stream());
  l.whole = nullptr;
}

size_t DevicePartitionedFrozenWeights::held_bytes() const {
  size_t n = 0;
  for (const auto& [layer, l] : layers_) n += l.mine.bytes();
  return n;
}

size_t DevicePartitionedFrozenWeights::largest_layer_bytes() const {
  size_t most = 0;
  for (const auto& [layer, l] : layers_)
    most = std::max(most, bytes(l.share * static_cast<size_t>(comm_.size())));
  return most;
}

}  // namespace dsx::engine
