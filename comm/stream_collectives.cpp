// Collectives ordered on a device stream, for backends that run on the host (see
// Communicator::allreduce_on): the operation is issued and waited for in a host task of the
// stream, so it starts after the stream's earlier work and the stream's later work sees its result.
#include <array>

#include "comm/communicator.h"

namespace dsx::comm {
namespace {

using device::Access;
using device::Touch;
using device::bytes_of;

}  // namespace

void Communicator::allreduce_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                                ReduceOp op) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Write}};
  device.host_task(stream, [=, this] { allreduce(data, count, dtype, op)->wait(); }, touches, "allreduce");
}

void Communicator::reduce_scatter_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                                     size_t count, DType dtype, ReduceOp op) {
  const std::array<Touch, 2> touches{Touch{input, bytes_of(dtype, count * static_cast<size_t>(size())), Access::Read},
                                     Touch{output, bytes_of(dtype, count), Access::Write}};
  device.host_task(stream, [=, this] { reduce_scatter(input, output, count, dtype, op)->wait(); }, touches,
                   "reduce_scatter");
}

void Communicator::allgather_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                                size_t count, DType dtype) {
  const std::array<Touch, 2> touches{Touch{input, bytes_of(dtype, count), Access::Read},
                                     Touch{output, bytes_of(dtype, count * static_cast<size_t>(size())), Access::Write}};
  device.host_task(stream, [=, this] { allgather(input, output, count, dtype)->wait(); }, touches, "allgather");
}

void Communicator::send_on(device::Device& device, device::Stream& stream, const void* data, size_t count, DType dtype,
                           int peer) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Read}};
  device.host_task(stream, [=, this] { send(data, count, dtype, peer)->wait(); }, touches, "send");
}

void Communicator::recv_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                           int peer) {
  const std::array<Touch, 1> touches{Touch{data, bytes_of(dtype, count), Access::Write}};
  device.host_task(stream, [=, this] { recv(data, count, dtype, peer)->wait(); }, touches, "recv");
}

}  // namespace dsx::comm
