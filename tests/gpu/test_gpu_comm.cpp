// Communication on GPUs: the nccl backend on device memory (one rank on any GPU machine, two
// ranks where two GPUs exist), and the ofi backend staging device buffers through host memory.
// Ranks are forked processes over 127.0.0.1; the parent never touches CUDA (a forked child
// cannot use a CUDA context its parent created), so it asks a child how many GPUs there are.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "comm/logging_communicator.h"
#include "device/cuda_device.h"
#include "tests/comm/comm_harness.h"
#include "tests/gpu/visible_gpus.h"
#ifdef DSX_CUDA_EMULATED
#include "tests/emulated_gpu/emulated_gpu.h"
#endif

namespace dsx::comm {
namespace {

using namespace std::chrono_literals;

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Allreduce (sum and avg), allgather, broadcast and barrier on cudaMalloc'd fp32 buffers.
void device_collectives(Communicator& comm, int rank) {
  device::use_rank_device();  // as every dsx path that allocates device memory does first
  const int p = comm.size();
  const size_t n = 100003;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((static_cast<size_t>(rank) + i) % 9);
  float *x = nullptr, *all = nullptr;
  expect(cudaMalloc(&x, n * 4) == cudaSuccess && cudaMalloc(&all, n * 4 * static_cast<size_t>(p)) == cudaSuccess, "cudaMalloc");
  cudaMemcpy(x, host.data(), n * 4, cudaMemcpyHostToDevice);
  comm.allgather(x, all, n, DType::F32)->wait();
  comm.allreduce(x, n, DType::F32, ReduceOp::Sum)->wait();
  std::vector<float> sum(n), gathered(n * static_cast<size_t>(p));
  cudaMemcpy(sum.data(), x, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(gathered.data(), all, gathered.size() * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < p; ++r) {
      float v = static_cast<float>((static_cast<size_t>(r) + i) % 9);
      want += v;
      expect(gathered[static_cast<size_t>(r) * n + i] == v, "allgather element " + std::to_string(i));
    }
    expect(sum[i] == want, "allreduce element " + std::to_string(i));
  }
  if (rank == 0) cudaMemcpy(x, host.data(), n * 4, cudaMemcpyHostToDevice);
  comm.broadcast(x, n, DType::F32, 0)->wait();
  comm.barrier()->wait();
  cudaMemcpy(sum.data(), x, n * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) expect(sum[i] == static_cast<float>(i % 9), "broadcast element " + std::to_string(i));
  cudaFree(x);
  cudaFree(all);
}

// Each rank sends 64 MiB to its right neighbour, then receives from its left one, and only then
// waits: without NCCL's grouping of the two, both sends would wait on receives queued behind
// them. With one rank it sends to itself, which deadlocks the same way.
void send_then_receive(Communicator& comm, int rank) {
  device::use_rank_device();
  const int p = comm.size();
  const size_t n = size_t(16) << 20;
  float *out = nullptr, *in = nullptr;
  expect(cudaMalloc(&out, n * 4) == cudaSuccess && cudaMalloc(&in, n * 4) == cudaSuccess, "cudaMalloc");
  std::vector<float> host(n, static_cast<float>(rank + 1));
  cudaMemcpy(out, host.data(), n * 4, cudaMemcpyHostToDevice);
  auto sent = comm.send(out, n, DType::F32, (rank + 1) % p);
  auto received = comm.recv(in, n, DType::F32, (rank + p - 1) % p);
  sent->wait(60s);
  received->wait(60s);
  cudaMemcpy(host.data(), in, n * 4, cudaMemcpyDeviceToHost);
  const float want = static_cast<float>((rank + p - 1) % p + 1);
  expect(host.front() == want && host.back() == want, "received data");
  cudaFree(out);
  cudaFree(in);
}

// A group closed with work nobody waited for: the Work completes (or fails), never hangs.
void close_with_work_in_flight(Communicator& comm, int) {
  device::use_rank_device();
  const size_t n = size_t(8) << 20;
  float* x = nullptr;
  expect(cudaMalloc(&x, n * 4) == cudaSuccess, "cudaMalloc");
  WorkHandle work;
  {
    auto group = comm.new_group({0});
    work = group->allreduce(x, n, DType::F32, ReduceOp::Sum);
  }
  expect(work->done(), "the Work is finished once its communicator is closed");
  work->wait(1s);  // completed, not failed
  cudaFree(x);
}

// comms_logger over nccl: a stream-ordered allreduce goes to NCCL's own (enqueued on the stream),
// not through a host wait, and the table counts it. The emulated GPU counts host waits.
void logged_stream_allreduce(Communicator& comm, int) {
  auto device = device::make_cuda_device();
  device::Stream& stream = device->compute_stream();
  LoggingCommunicator logged(comm, {}, false);
  const size_t n = 4099;
  std::vector<float> host(n, 1.5f);
  auto* x = static_cast<float*>(device->allocate(n * 4, device::Placement::Communicated, stream));
  device->copy(x, host.data(), n * 4, stream);
  stream.synchronize(60s);
#ifdef DSX_CUDA_EMULATED
  const uint64_t syncs = emu::host_syncs();
#endif
  logged.allreduce_on(*device, stream, x, n, DType::F32, ReduceOp::Sum);
#ifdef DSX_CUDA_EMULATED
  expect(emu::host_syncs() == syncs, "allreduce_on waited for the stream on the host");
#endif
  device->copy(host.data(), x, n * 4, stream);
  stream.synchronize(60s);
  for (float v : host) expect(v == 1.5f * static_cast<float>(comm.size()), "allreduce result");
  const std::string table = logged.summary();
  expect(table.find("all_reduce") != std::string::npos && table.find(" - ") != std::string::npos,
         "the table counts the stream-ordered allreduce, without a latency:\n" + table);
  device->free(x, n * 4, stream);
  stream.synchronize(60s);
}

comm::CommOptions options(const std::string& backend) {
  auto o = test::test_options(backend == "ofi" ? "shm" : "");
  o.backend = backend;
  o.chunk_bytes = 64 << 10;
  return o;
}

TEST(NcclComm, OneRankRunsEveryCollectiveOnDeviceMemory) {
  if (test::visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto result = test::run_job(1, options("nccl"), device_collectives, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(NcclComm, TwoRanksOnTwoGpus) {
  if (test::visible_gpus() < 2) GTEST_SKIP() << "needs two GPUs";
  auto result = test::run_job(2, options("nccl"), device_collectives, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(NcclComm, SendThenReceiveToItselfDoesNotDeadlock) {
  if (test::visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto result = test::run_job(1, options("nccl"), send_then_receive, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(NcclComm, TwoRanksEachSendThenReceive) {
  if (test::visible_gpus() < 2) GTEST_SKIP() << "needs two GPUs";
  auto result = test::run_job(2, options("nccl"), send_then_receive, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(NcclComm, ClosingCompletesWorkInFlight) {
  if (test::visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto result = test::run_job(1, options("nccl"), close_with_work_in_flight, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(NcclComm, TheCommsLoggerKeepsStreamFormsOnTheStream) {
  if (test::visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto result = test::run_job(1, options("nccl"), logged_stream_allreduce, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(OfiComm, DeviceBuffersAreStagedThroughHostMemory) {
  if (test::visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto result = test::run_job(2, options("ofi"), device_collectives, 120s);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

}  // namespace
}  // namespace dsx::comm
