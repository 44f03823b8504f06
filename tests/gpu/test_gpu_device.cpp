// The cuda device's calls beyond the stream-ordered ones (tests/device/device_memory_checks.h,
// the same checks the cpu device passes), and the process's GPU choice and count.
#include <gtest/gtest.h>

#include "device/cuda_device.h"
#include "tests/device/device_memory_checks.h"

namespace {

using dsx::device::cuda_device_count;
using dsx::device::make_cuda_device;

TEST(CudaDevice, SetUpMemoryCopiesAndFills) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto device = make_cuda_device();
  dsx::device::testing::check_memory_now(*device);
}

TEST(CudaDevice, PinnedMemoryAndEventQueries) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto device = make_cuda_device();
  dsx::device::testing::check_pinned_and_events(*device);
}

TEST(CudaDevice, NarrowsDoublesAndTimesEvents) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto device = make_cuda_device();
  dsx::device::testing::check_narrowing_and_timed_events(*device);
}

TEST(CudaDevice, AnAdoptedStreamRunsWork) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto device = make_cuda_device();
  dsx::device::testing::check_adopted_stream(*device);
}

TEST(CudaDevice, TheChoiceIsTheDevicesOrdinal) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto device = make_cuda_device();
  EXPECT_EQ(device->name(), "cuda:" + std::to_string(dsx::device::chosen_device()));
  EXPECT_EQ(dsx::device::use_chosen_device(), dsx::device::chosen_device());
}

}  // namespace
