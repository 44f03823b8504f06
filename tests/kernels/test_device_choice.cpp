// Which GPU a rank uses: LOCAL_RANK among the visible devices, with a clear error when the node
// starts more ranks than it has GPUs - unless the ranks talk over ofi, which lets them share.
// In a CUDA build the process-wide choice is checked too.
#include <gtest/gtest.h>

#include <string>

#include "dsx/error.h"
#include "kernels/device_choice.h"
#ifdef DSX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/cuda_device.h"
#endif

namespace dsx::kernels {
namespace {

ErrorKind kind_of(int local_rank, int visible, std::string* message = nullptr) {
  try {
    choose_device(local_rank, visible, false, "2,3");
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "choose_device(" << local_rank << ", " << visible << ") did not throw";
  return ErrorKind::Internal;
}

TEST(DeviceChoice, EachLocalRankGetsItsOwnDevice) {
  EXPECT_EQ(choose_device(0, 1), 0);
  EXPECT_EQ(choose_device(0, 8), 0);
  EXPECT_EQ(choose_device(5, 8), 5);
  EXPECT_EQ(choose_device(7, 8), 7);
}

TEST(DeviceChoice, MoreRanksThanGpusIsAConfigErrorNamingBoth) {
  std::string message;
  EXPECT_EQ(kind_of(2, 2, &message), ErrorKind::Config);
  EXPECT_NE(message.find("LOCAL_RANK 2"), std::string::npos) << message;
  EXPECT_NE(message.find("2 device(s)"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES=2,3"), std::string::npos) << message;
  EXPECT_NE(message.find("DSX_COMM_BACKEND=ofi"), std::string::npos) << message;
  EXPECT_EQ(kind_of(9, 8), ErrorKind::Config);
  EXPECT_EQ(kind_of(-1, 8), ErrorKind::Config);
}

TEST(DeviceChoice, OverOfiRanksShareGpusRoundRobin) {
  EXPECT_EQ(choose_device(1, 1, true), 0);
  EXPECT_EQ(choose_device(3, 2, true), 1);
  EXPECT_EQ(choose_device(1, 2, true), 1);  // enough GPUs: sharing changes nothing
  EXPECT_THROW(choose_device(0, 0, true), Error);
  EXPECT_THROW(choose_device(-1, 2, true), Error);
  EXPECT_TRUE(ranks_may_share_gpu("ofi"));
  EXPECT_FALSE(ranks_may_share_gpu("nccl"));
  EXPECT_FALSE(ranks_may_share_gpu("auto"));  // auto is nccl wherever a GPU is visible
  EXPECT_FALSE(ranks_may_share_gpu(""));
  EXPECT_FALSE(ranks_may_share_gpu(nullptr));
}

TEST(DeviceChoice, NoVisibleGpuIsUnsupported) {
  std::string message;
  EXPECT_EQ(kind_of(0, 0, &message), ErrorKind::Unsupported);
  EXPECT_NE(message.find("no GPU is visible"), std::string::npos) << message;
}

TEST(DeviceChoice, LocalRankIsParsedStrictly) {
  EXPECT_EQ(parse_local_rank(nullptr), 0);
  EXPECT_EQ(parse_local_rank(""), 0);
  EXPECT_EQ(parse_local_rank("3"), 3);
  for (const char* bad : {"-1", "x", "1x", "99999999999"}) {
    try {
      parse_local_rank(bad);
      ADD_FAILURE() << "LOCAL_RANK=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

#ifdef DSX_HAVE_CUDA
// Nothing is chosen until asked; then the choice follows LOCAL_RANK (unset here: 0) on a machine
// with a GPU, and fails clearly, choosing nothing, on one without.
TEST(DeviceChoice, TheProcessChoosesOnceAndOnlyWhenAsked) {
  EXPECT_EQ(device::chosen_device(), -1);
  EXPECT_EQ(device::use_chosen_device(), -1);
  const int count = device::cuda_device_count();
  if (count == 0) {
    try {
      device::use_rank_device(0, false);
      ADD_FAILURE() << "use_rank_device succeeded without a GPU";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    }
    EXPECT_EQ(device::chosen_device(), -1);
    return;
  }
  EXPECT_EQ(device::use_rank_device(0, false), 0);
  EXPECT_EQ(device::chosen_device(), 0);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
  if (count > 1) {
    EXPECT_THROW(device::use_rank_device(1, false), Error);
  }
}
#endif

}  // namespace
}  // namespace dsx::kernels
