// The kernels' workspaces that a CUDA model hands in (kernels/cuda/workspace.h,
// models/cuda_workspaces.h): DecoderBlas refuses a workspace too small or misaligned and keeps its
// bias gradients inside the one it was given (the column sums checked against exact values); a
// StreamWorkspace, cuDNN attention's, reuses its block while it is big enough and grows on its
// stream without a host wait (counted on the emulated GPU). Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/cuda_device.h"
#include "device/owned_memory.h"
#include "dsx/error.h"
#include "kernels/cuda/decoder_layers.h"
#include "models/cuda_workspaces.h"
#ifdef DSX_CUDA_EMULATED
#include "tests/emulated_gpu/emulated_gpu.h"
#endif

namespace {

using namespace std::chrono_literals;
using dsx::Error;
using dsx::ErrorKind;
using dsx::device::OwnedMemory;
using dsx::kernels::cuda::DecoderBlas;
using dsx::kernels::cuda::Workspace;

// Whether constructing a DecoderBlas on `workspace` throws Error(Internal) naming workspace_bytes.
bool refused(Workspace workspace) {
  try {
    DecoderBlas blas(workspace);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("workspace_bytes(0)"), std::string::npos) << e.what();
    return true;
  }
  return false;
}

TEST(DecoderBlasWorkspace, RefusesTooSmallOrMisaligned) {
  if (dsx::device::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto gpu = dsx::device::make_cuda_device();
  const size_t bytes = DecoderBlas::workspace_bytes(0);
  EXPECT_EQ(DecoderBlas::workspace_bytes(10) - bytes, 128u * 10 * sizeof(float))
      << "the bias scratch: kMaxRowChunks rows of fp32 column sums";
  OwnedMemory memory(*gpu, OwnedMemory::Kind::Device, bytes + 256);
  EXPECT_TRUE(refused({memory.get(), bytes - 1}));
  EXPECT_TRUE(refused({static_cast<char*>(memory.get()) + 16, bytes}));
  EXPECT_FALSE(refused({memory.get(), bytes}));
}

// dbias += column sums of dout (N x OC) with dout[r][c] = c + 1 and dbias = 0.5: exactly
// 0.5 + N (c + 1), whatever order the chunks add in.
TEST(DecoderBlasWorkspace, BiasGradientWithinTheGivenScratch) {
  if (dsx::device::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto gpu = dsx::device::make_cuda_device();
  dsx::device::Stream& stream = gpu->compute_stream();
  auto s = static_cast<cudaStream_t>(stream.native());
  const size_t N = 300;
  const int OC = 48;
  OwnedMemory memory = dsx::models::decoder_blas_workspace(*gpu, OC);
  DecoderBlas blas(dsx::models::workspace_of(memory));

  std::vector<float> dout(N * OC), dbias(OC + 1, 0.5f);
  for (size_t r = 0; r < N; ++r)
    for (int c = 0; c < OC; ++c) dout[r * OC + c] = float(c + 1);
  // Room for the larger matrix of the refused call below.
  const size_t many_rows = 128 * 32;  // cut into all kMaxRowChunks chunks (kernels/column_sums.h)
  OwnedMemory dout_dev(*gpu, OwnedMemory::Kind::Device, many_rows * (OC + 1) * sizeof(float));
  OwnedMemory dbias_dev(*gpu, OwnedMemory::Kind::Device, dbias.size() * sizeof(float));
  gpu->copy_now(dout_dev.get(), dout.data(), dout.size() * sizeof(float));
  gpu->copy_now(dbias_dev.get(), dbias.data(), dbias.size() * sizeof(float));
  dsx::kernels::cuda::decoder_bias_backward(blas, dbias_dev.as<float>(), dout_dev.as<const float>(),
                                            N, OC, s);
  stream.synchronize(60s);
  gpu->copy_now(dbias.data(), dbias_dev.get(), dbias.size() * sizeof(float));
  for (int c = 0; c < OC; ++c)
    EXPECT_EQ(dbias[c], 0.5f + float(N) * float(c + 1)) << "column " << c;
  EXPECT_EQ(dbias[OC], 0.5f) << "written past the bias";

  // One column wider than the workspace was sized for, at a row count that needs every chunk:
  // refused before anything is enqueued.
  try {
    dsx::kernels::cuda::decoder_bias_backward(blas, dbias_dev.as<float>(),
                                              dout_dev.as<const float>(), many_rows, OC + 1, s);
    ADD_FAILURE() << "a bias wider than the workspace's scratch was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("workspace_bytes"), std::string::npos) << e.what();
  }
}

TEST(StreamWorkspace, ReusesThenGrowsOnItsStreamWithoutAHostWait) {
  if (dsx::device::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto gpu = dsx::device::make_cuda_device();
  auto stream = gpu->create_stream("workspace");
  std::vector<uint8_t> host(4096);
  {
    dsx::models::StreamWorkspace workspace(*gpu, *stream);
    const Workspace first = workspace.grow(1000);
    ASSERT_NE(first.data, nullptr);
    EXPECT_GE(first.bytes, 1000u);
    const Workspace again = workspace.grow(500);
    EXPECT_EQ(again.data, first.data) << "a smaller need must reuse the block";
    EXPECT_EQ(again.bytes, first.bytes);
    gpu->fill_bytes(first.data, 0x11, first.bytes, *stream);  // work that still uses the old block
#ifdef DSX_CUDA_EMULATED
    const uint64_t before = dsx::emu::host_syncs_of_this_thread();
#endif
    const Workspace grown = workspace.grow(host.size());
#ifdef DSX_CUDA_EMULATED
    EXPECT_EQ(dsx::emu::host_syncs_of_this_thread() - before, 0u) << "growing waited on the host";
#endif
    ASSERT_NE(grown.data, nullptr);
    EXPECT_EQ(grown.bytes, host.size());
    EXPECT_EQ(workspace.bytes(), host.size());
    gpu->fill_bytes(grown.data, 0x5a, grown.bytes, *stream);
    gpu->copy(host.data(), grown.data, host.size(), *stream);
    stream->synchronize(60s);
  }  // given back on the stream
  stream->synchronize(60s);
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], 0x5a) << "byte " << i;
}

}  // namespace
