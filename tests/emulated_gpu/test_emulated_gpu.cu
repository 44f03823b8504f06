// The emulated GPU checked against what a GPU does: kernels run with their shape, barriers and
// shuffles mean what they mean in CUDA, shared-memory races and impossible launches are reported,
// streams and events order work, and the host cannot read device memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "tests/emulated_gpu/emulated_gpu.h"

namespace {

// Block sums of `in` into out[blockIdx.x]: warp shuffles, then the warps' sums through shared
// memory; `with_barrier` false drops the __syncthreads between writing and reading them.
__global__ void block_sums_kernel(const float* in, float* out, bool with_barrier) {
  DSX_SHARED(float, warp_sums, 32);
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  if (with_barrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += warp_sums[w];
    out[blockIdx.x] = s;
  }
}

__global__ void shuffles_kernel(int* out) {
  const int lane = int(threadIdx.x);
  out[lane] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[32 + lane] = __shfl_up_sync(0xffffffffu, lane, 5);
  out[64 + lane] = __shfl_xor_sync(0xffffffffu, lane, 9);
  out[96 + lane] = __shfl_sync(0xffffffffu, lane, 7, 8);
  out[128 + lane] = int(__ballot_sync(0xffffffffu, lane % 3 == 0) & 0x7fffffff);
}

// Only the first half of the block reaches the barrier: undefined in CUDA, reported here.
__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < blockDim.x / 2) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void fill_kernel(float* out, float value, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

// out += in, by one block: the test orders it after the fills of another stream by an event.
__global__ void add_kernel(float* out, const float* in, size_t n) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) out[i] += in[i];
}

template <class T>
struct Device {
  explicit Device(size_t n) : count(n) { EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess); }
  ~Device() { cudaFree(ptr); }
  std::vector<T> download() const {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  T* ptr = nullptr;
  size_t count;
};

TEST(EmulatedGpu, BlockReductionWithBarrierIsExact) {
  std::vector<float> in(4 * 256);
  std::iota(in.begin(), in.end(), 0.0f);
  Device<float> din(in.size()), dout(4);
  ASSERT_EQ(cudaMemcpy(din.ptr, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  DSX_LAUNCH(4, 256, 0, nullptr, block_sums_kernel)(din.ptr, dout.ptr, true);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> out = dout.download();
  for (int b = 0; b < 4; ++b) {
    double want = 0;
    for (int i = 0; i < 256; ++i) want += in[size_t(b * 256 + i)];
    EXPECT_EQ(out[size_t(b)], float(want)) << "block " << b;
  }
}

// A child that forks would lose the stream workers: death tests re-execute the binary instead.
#define THREADSAFE_DEATH_TESTS() GTEST_FLAG_SET(death_test_style, "threadsafe")

// Each fault poisons the process's GPU, as on hardware: these run in a child and exit with 3
// when the fault surfaced as CUDA reports it.
[[noreturn]] void reduce_without_barrier() {
  Device<float> din(256), dout(1);
  cudaMemset(din.ptr, 0, 256 * 4);
  DSX_LAUNCH(1, 256, 0, nullptr, block_sums_kernel)(din.ptr, dout.ptr, false);
  std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
}

TEST(EmulatedGpuDeathTest, MissingBarrierIsReportedAsARace) {
  THREADSAFE_DEATH_TESTS();
  EXPECT_EXIT(reduce_without_barrier(), ::testing::ExitedWithCode(3),
              "race on shared memory 'warp_sums'.*thread \\(32,0,0\\).*thread \\(0,0,0\\).*"
              "with no __syncthreads between");
}

TEST(EmulatedGpu, ShufflesAndVotesFollowCuda) {
  Device<int> out(160);
  DSX_LAUNCH(1, 32, 0, nullptr, shuffles_kernel)(out.ptr);
  const std::vector<int> got = out.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(got[size_t(lane)], lane + 3 < 32 ? lane + 3 : lane) << lane;
    EXPECT_EQ(got[size_t(32 + lane)], lane >= 5 ? lane - 5 : lane) << lane;
    EXPECT_EQ(got[size_t(64 + lane)], lane ^ 9) << lane;
    EXPECT_EQ(got[size_t(96 + lane)], (lane & ~7) + 7) << lane;
  }
  int ballot = 0;
  for (int lane = 0; lane < 31; ++lane) ballot |= (lane % 3 == 0) << lane;
  EXPECT_EQ(got[128], ballot);
}

TEST(EmulatedGpu, ImpossibleLaunchesFailAsOnTheGpu) {
  Device<float> out(4096);
  DSX_LAUNCH(1, 2048, 0, nullptr, fill_kernel)(out.ptr, 1.0f, size_t(4096));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  DSX_LAUNCH(dim3(1, 70000), 32, 0, nullptr, fill_kernel)(out.ptr, 1.0f, size_t(4096));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  DSX_LAUNCH(1, dim3(8, 8, 65), 0, nullptr, fill_kernel)(out.ptr, 1.0f, size_t(4096));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  DSX_LAUNCH(1, 32, 64 * 1024, nullptr, fill_kernel)(out.ptr, 1.0f, size_t(4096));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the last error is cleared once read
}

[[noreturn]] void divergent_barrier() {
  Device<float> out(64);
  DSX_LAUNCH(1, 64, 0, nullptr, divergent_barrier_kernel)(out.ptr);
  std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
}

TEST(EmulatedGpuDeathTest, ABarrierNotAllThreadsReachIsReported) {
  THREADSAFE_DEATH_TESTS();
  EXPECT_EXIT(divergent_barrier(), ::testing::ExitedWithCode(3),
              "threads exited without reaching the __syncthreads that others wait in: thread "
              "\\(0,0,0\\) waits in __syncthreads");
}

TEST(EmulatedGpuDeathTest, TheHostCannotReadDeviceMemory) {
  THREADSAFE_DEATH_TESTS();
  EXPECT_DEATH(
      {
        Device<float> d(16);
        cudaDeviceSynchronize();
        volatile float x = d.ptr[3];
        (void)x;
      },
      "the host touched device memory at 0x[0-9a-f]+, byte 12 of a 256-byte allocation on GPU 0");
}

TEST(EmulatedGpu, CopiesMustMatchWhereTheirPointersLive) {
  Device<float> d(16);
  std::vector<float> host(16, 1.0f);
  EXPECT_EQ(cudaMemcpy(d.ptr, host.data(), 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), d.ptr, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.ptr, host.data(), 64 + 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "a range past the allocation";
  EXPECT_EQ(cudaMemcpy(d.ptr, host.data(), 64, cudaMemcpyDefault), cudaSuccess);
}

TEST(EmulatedGpu, StreamsRunConcurrentlyAndEventsOrderThem) {
  const size_t n = 1 << 16;
  Device<float> a(n), b(n);
  cudaStream_t s1, s2;
  cudaEvent_t written;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  DSX_LAUNCH(8, 256, 0, s1, fill_kernel)(a.ptr, 2.0f, n);
  DSX_LAUNCH(8, 256, 0, s1, fill_kernel)(b.ptr, 3.0f, n);
  ASSERT_EQ(cudaEventRecord(written, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, written, 0), cudaSuccess);
  DSX_LAUNCH(1, 256, 0, s2, add_kernel)(a.ptr, b.ptr, n);
  ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
  for (float v : a.download()) ASSERT_EQ(v, 5.0f);
  cudaEventDestroy(written);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
}

// Stream s2 adds what s1 filled, with or without the event between them; the launches declare
// what they touch, so the order check sees the missing wait whatever the timing.
[[noreturn]] void add_after_fill(bool with_event) {
  const size_t n = 4096;
  Device<float> a(n), b(n);
  cudaStream_t s1, s2;
  cudaEvent_t filled;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
  DSX_TOUCHES(DSX_WRITES(b.ptr, n * 4));
  DSX_LAUNCH(8, 256, 0, s1, fill_kernel)(b.ptr, 3.0f, n);
  cudaEventRecord(filled, s1);
  if (with_event) cudaStreamWaitEvent(s2, filled, 0);
  DSX_TOUCHES(DSX_WRITES(a.ptr, n * 4), DSX_READS(b.ptr, n * 4));
  DSX_LAUNCH(1, 256, 0, s2, add_kernel)(a.ptr, b.ptr, n);
  std::exit(cudaStreamSynchronize(s2) == cudaSuccess ? 0 : 3);
}

TEST(EmulatedGpuDeathTest, AStreamReadingAnotherStreamsWritesWithoutAnEventIsReported) {
  THREADSAFE_DEATH_TESTS();
  EXPECT_EXIT(add_after_fill(false), ::testing::ExitedWithCode(3),
              "stream-order violation: reads bytes .* not ordered after they were written on another stream");
  EXPECT_EXIT(add_after_fill(true), ::testing::ExitedWithCode(0), "");
}

TEST(EmulatedGpu, HostSynchronisationsAreCounted) {
  Device<float> d(1024);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<float> pinned_like(1024);
  const uint64_t before = dsx::emu::host_syncs();
  DSX_LAUNCH(2, 256, 0, s, fill_kernel)(d.ptr, 1.0f, size_t(1024));
  EXPECT_EQ(dsx::emu::host_syncs(), before) << "a launch does not wait";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(dsx::emu::host_syncs(), before + 1);
  while (cudaStreamQuery(s) == cudaErrorNotReady) {
  }
  EXPECT_EQ(dsx::emu::host_syncs(), before + 2) << "a polled point counts once";
  ASSERT_EQ(cudaMemcpy(pinned_like.data(), d.ptr, 4096, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(dsx::emu::host_syncs(), before + 3) << "a copy into pageable memory waits";
  cudaStreamDestroy(s);
}

TEST(EmulatedGpu, OutOfMemoryIsAnError) {
  void* p = nullptr;
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, total + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
}

[[noreturn]] void reduce_in_random_order() {
  setenv("DSX_EMULATED_SCHEDULE", "random:17", 1);
  std::vector<float> in(256, 0.5f);
  Device<float> din(256), dout(1);
  cudaMemcpy(din.ptr, in.data(), 1024, cudaMemcpyHostToDevice);
  DSX_LAUNCH(1, 256, 0, nullptr, block_sums_kernel)(din.ptr, dout.ptr, true);
  std::exit(dout.download()[0] == 128.0f && cudaDeviceSynchronize() == cudaSuccess ? 3 : 0);
}

// DSX_EMULATED_SCHEDULE=random:SEED runs each block's threads in a shuffled order between
// synchronisation points; a race-free kernel's result cannot change.
TEST(EmulatedGpuDeathTest, ARandomScheduleGivesTheSameSums) {
  THREADSAFE_DEATH_TESTS();
  EXPECT_EXIT(reduce_in_random_order(), ::testing::ExitedWithCode(3), "");
}

}  // namespace
