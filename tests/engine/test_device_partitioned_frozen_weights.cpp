// The frozen base partitioned on a device (engine/device_partitioned_frozen_weights.h), on the
// cpu device with its stream-order checker and random delays, over two real ranks (ofi on
// loopback): each rank keeps ceil(layer / 2) elements of every layer in the model's dtype; a
// gathered layer, prefetched or not, on ZeRO-like communication stream, gives back every tensor
// of the base rounded to that dtype, and again after a release; the compute stream is ordered
// after each gather (the checker reports a read that is not, and a delay makes it wrong).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "device/cpu_device.h"
#include "engine/device_partitioned_frozen_weights.h"
#include "kernels/mixed_precision.h"
#include "tests/comm/comm_harness.h"

namespace {

using dsx::kernels::DType;
namespace m = dsx::models;

// Three layers of odd sizes (so the last rank's share is padded), one of them a single tensor.
std::vector<m::ParamSpec> specs() {
  std::vector<m::ParamSpec> s;
  size_t offset = 0;
  auto add = [&](const std::string& name, size_t numel, int layer) {
    m::ParamSpec p;
    p.name = name, p.numel = numel, p.shape = {static_cast<int64_t>(numel)}, p.layer = layer,
    p.offset = offset;
    offset += numel;
    s.push_back(p);
  };
  add("embed", 37, 0), add("block.a", 101, 1), add("block.b", 12, 1), add("norm", 9, 2),
      add("head", 40, 2);
  return s;
}

// The base rounded to `dtype`, as the shares hold it.
std::vector<uint8_t> rounded(const std::vector<float>& flat, DType dtype) {
  std::vector<uint8_t> out(flat.size() * dsx::kernels::dtype_size(dtype));
  dsx::kernels::cast(DType::F32, flat.data(), dtype, out.data(), flat.size());
  return out;
}

void check_layer(dsx::engine::DevicePartitionedFrozenWeights& part, dsx::device::Device& cpu,
                 const std::vector<m::ParamSpec>& all, const std::vector<uint8_t>& want,
                 DType dtype, int layer) {
  const size_t e = dsx::kernels::dtype_size(dtype);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].layer != layer) continue;
    const void* got = part.param(i);
    const std::array<dsx::device::Touch, 1> t{dsx::device::Touch{got, all[i].numel * e}};
    cpu.host_access(t, "test read");
    if (std::memcmp(got, want.data() + all[i].offset * e, all[i].numel * e) != 0)
      throw std::runtime_error(all[i].name + ": the gathered tensor differs from the base");
  }
}

void gathers_give_back_the_base(dsx::comm::Communicator& comm, DType dtype) {
  dsx::device::CpuDeviceOptions options;
  options.check_order = true, options.max_delay_us = 300;
  auto cpu = dsx::device::make_cpu_device(options);
  auto comm_stream = cpu->create_stream("communication");
  const auto all = specs();
  std::vector<float> flat(all.back().offset + all.back().numel);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = 0.01f * static_cast<float>(i) + 1.0f / 3.0f;
  const auto want = rounded(flat, dtype);
  dsx::engine::DevicePartitionedFrozenWeights part(all, flat, dtype, *cpu, comm);
  part.order_on(*comm_stream);
  const size_t e = dsx::kernels::dtype_size(dtype);
  if (part.held_bytes() != (19 + 57 + 25) * e)  // ceil(37/2) + ceil(113/2) + ceil(49/2)
    throw std::runtime_error("rank keeps " + std::to_string(part.held_bytes()) + " bytes");
  if (part.largest_layer_bytes() != 114 * e)
    throw std::runtime_error("largest layer is not 2 x 57");
  for (int pass = 0; pass < 2; ++pass) {  // forward order, then again after every release
    part.acquire(0);
    part.prefetch(1);
    check_layer(part, *cpu, all, want, dtype, 0);
    part.release(0);
    for (int layer = 1; layer <= 2; ++layer) {
      part.acquire(layer);
      if (layer == 1) part.prefetch(2);
      check_layer(part, *cpu, all, want, dtype, layer);
      part.release(layer);
    }
  }
  part.prefetch(1);
  part.release(1);  // prefetched, never acquired: freed after its gather
  comm_stream->synchronize(std::chrono::seconds(30));
  cpu->compute_stream().synchronize(std::chrono::seconds(30));
}

TEST(DevicePartitionedFrozenWeights, TwoRanksGatherTheBaseInItsDtype) {
  auto job =
      dsx::test::run_job(2, dsx::test::test_options("tcp"), [](dsx::comm::Communicator& comm, int) {
        gathers_give_back_the_base(comm, DType::F32);
        gathers_give_back_the_base(comm, DType::BF16);
      });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

}  // namespace
