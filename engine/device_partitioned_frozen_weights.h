// The frozen base of a LoRA run at ZeRO stage 3 when ZeRO lives on a device (the GPU): as
// PartitionedFrozenWeights (partitioned_frozen_weights.h), but each rank's 1/world of every
// layer sits in device memory in the model's dtype, and a layer is gathered whole into
// stream-ordered device memory: the rank's share copied in, then an in-place allgather_on on
// ZeRO's communication stream (as zero/param_gatherer.h gathers trainable parameters), which the
// model's compute stream waits for when it acquires the layer; prefetch() starts the next layer's
// gather early, so that it runs beside the compute stream's work. release() frees the layer on
// the compute stream once the layer's work has run. The host never waits. No gradients and no
// optimizer state exist for these weights. Every rank acquires the layers in one order (the Model
// layer protocol), and once order_on() names ZeRO's communication stream, ZeRO's collectives and
// these gathers reach every rank's communicator in one order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"
#include "device/owned_memory.h"
#include "models/model.h"

namespace dsx::engine {

class DevicePartitionedFrozenWeights final : public models::ParamAccess {
 public:
  // `flat`: the whole base in `specs`' layout, fp32 (only this rank's share is kept, rounded to
  // `dtype`). Each layer's tensors must be contiguous in it, as the decoder models lay them out.
  // `device` is the one the model computes on (its compute stream is the model's).
  DevicePartitionedFrozenWeights(const std::vector<models::ParamSpec>& specs,
                                 const std::vector<float>& flat, kernels::DType dtype,
                                 device::Device& device, comm::Communicator& comm);
  ~DevicePartitionedFrozenWeights() override;  // frees the layers still gathered

  // Gathers from now on run on `stream` of the device (ZeRO's communication stream), after what
  // it already holds; until then on the compute stream. `stream` must outlive the gathers.
  void order_on(device::Stream& stream) { gather_stream_ = &stream; }

  void prefetch(int layer) override;  // the gather starts; the compute stream does not wait yet
  void acquire(int layer) override;   // a layer already gathered stays as it is
  const void* param(size_t index) override;
  void release(int layer) override;
  // Bytes this rank keeps between gathers (its shares, padding included).
  size_t held_bytes() const override;
  // The most bytes one gathered layer takes.
  size_t largest_layer_bytes() const;

 private:
  struct Layer {
    size_t begin = 0, end = 0;  // the layer's range of the flat layout
    size_t share = 0;           // elements per rank: ceil((end - begin) / world)
    device::OwnedMemory mine;   // this rank's share, in dtype_
    uint8_t* whole = nullptr;   // gathered (share * world elements), null when released
    std::unique_ptr<device::Event> gathered;
    bool waited = false;  // the compute stream waits for `gathered`
  };
  void start_gather(Layer& l);
  void order_compute_after(Layer& l);
  size_t bytes(size_t elements) const { return device::bytes_of(dtype_, elements); }

  std::vector<models::ParamSpec> specs_;
  kernels::DType dtype_;
  device::Device& device_;
  comm::Communicator& comm_;
  device::Stream* gather_stream_ = nullptr;
  std::map<int, Layer> layers_;
};

}  // namespace dsx::engine
