// Collectives ordered on a device stream, for backends that run on the host (see
// Communicator::allreduce_on). On a device whose memory the host reaches (cpu) the operation is
// issued and waited for in a host task of the stream, so it starts after the stream's earlier
// work and the stream's later work sees its result, while the caller goes on. On a GPU a stream's
// host function must not call CUDA, which a host backend does to stage device memory: there the
// caller waits for the stream and runs the operation itself.
#include <array>
#include <chrono>
#include <functional>

#include "comm/communicator.h"

namespace dsx::comm {
namespace {

using device::Access;
using device::bytes_of;
using device::Touch;

// How long the caller waits for a GPU stream's earlier work before it runs a host collective.
constexpr std::chrono::minutes kStreamDrainTimeout{10};

void run_ordered(device::Device& device, device::Stream& stream, std::function<void()> op,
                 std::span<const Touch> touches, const char* what) {
  if (device.host_accessible()) {
    device.host_task(stream, std::move(op), touches, what);
    return;
  }
  stream.synchronize(kStreamDrainTimeout);
  op();
}

}  // namespace

void Communicator::allreduce_on(device::Device& device, device::Stream& stream, void* data,
                                size_t count, DType dtype, ReduceOp op) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Write}};
  run_ordered(
      device, stream, [=, this] { allreduce(data, count, dtype, op)->wait(); }, touches,
      "allreduce");
}

void Communicator::reduce_scatter_on(device::Device& device, device::Stream& stream,
                                     const void* input, void* output, size_t count, DType dtype,
                                     ReduceOp op) {
  const std::array<Touch, 2> touches{
      Touch{input, bytes_of(dtype, count * static_cast<size_t>(size())), Access::Read},
      Touch{output, bytes_of(dtype, count), Access::Write}};
  run_ordered(
      device, stream, [=, this] { reduce_scatter(input, output, count, dtype, op)->wait(); },
      touches, "reduce_scatter");
}

void Communicator::allgather_on(device::Device& device, device::Stream& stream, const void* input,
                                void* output, size_t count, DType dtype) {
  const std::array<Touch, 2> touches{
      Touch{input, bytes_of(dtype, count), Access::Read},
      Touch{output, bytes_of(dtype, count * static_cast<size_t>(size())), Access::Write}};
  run_ordered(
      device, stream, [=, this] { allgather(input, output, count, dtype)->wait(); }, touches,
      "allgather");
}

void Communicator::send_on(device::Device& device, device::Stream& stream, const void* data,
                           size_t count, DType dtype, int peer) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Read}};
  run_ordered(
      device, stream, [=, this] { send(data, count, dtype, peer)->wait(); }, touches, "send");
}

void Communicator::recv_on(device::Device& device, device::Stream& stream, void* data, size_t count,
                           DType dtype, int peer) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Write}};
  run_ordered(
      device, stream, [=, this] { recv(data, count, dtype, peer)->wait(); }, touches, "recv");
}

}  // namespace dsx::comm
