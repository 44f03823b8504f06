// Where ZeRO's state lives and which backend carries it: chosen from where the model computes and
// the offload keys, never from whether a GPU is visible. A CPU run of a CUDA build, an offload
// run and (for now) a GPU run without offload all keep host buffers and use ofi; nccl is only
// chosen for, and only allowed with, buffers in GPU memory.
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "engine/arrangement.h"

namespace {

using dsx::engine::Arrangement;
using dsx::engine::ArrangementInputs;
using dsx::engine::choose_arrangement;

ArrangementInputs inputs(bool gpu, bool offload_optimizer, bool resident,
                         const char* request = "auto") {
  ArrangementInputs in;
  in.model_on_gpu = gpu;
  in.offload_optimizer = offload_optimizer;
  in.device_resident_supported = resident;
  in.backend_request = request;
  return in;
}

TEST(Arrangement, CpuModelsKeepZeroInHostMemoryOverOfi) {
  for (bool resident : {false, true}) {
    const Arrangement a = choose_arrangement(inputs(false, false, resident));
    EXPECT_FALSE(a.zero_on_gpu);
    EXPECT_EQ(a.backend, "ofi") << "a visible GPU must not pick nccl for host buffers";
    EXPECT_NE(a.summary.find("host memory"), std::string::npos) << a.summary;
  }
}

TEST(Arrangement, OffloadIsTheHostArrangement) {
  ArrangementInputs in = inputs(true, true, true);
  Arrangement a = choose_arrangement(in);
  EXPECT_FALSE(a.zero_on_gpu);
  EXPECT_EQ(a.backend, "ofi");
  EXPECT_NE(a.summary.find("offload_optimizer.device cpu"), std::string::npos) << a.summary;
  in.offload_optimizer = false;
  in.offload_param = true;
  a = choose_arrangement(in);
  EXPECT_FALSE(a.zero_on_gpu);
  EXPECT_NE(a.summary.find("offload_param"), std::string::npos) << a.summary;
}

TEST(Arrangement, GpuWithoutOffloadIsDeviceResidentOverNccl) {
  const Arrangement a = choose_arrangement(inputs(true, false, true));
  EXPECT_TRUE(a.zero_on_gpu);
  EXPECT_EQ(a.backend, "nccl");
  EXPECT_NE(a.summary.find("GPU memory"), std::string::npos) << a.summary;
}

TEST(Arrangement, WithoutDeviceResidentSupportTheOffloadArrangementRunsAndSaysSo) {
  const Arrangement a = choose_arrangement(inputs(true, false, false));
  EXPECT_FALSE(a.zero_on_gpu);
  EXPECT_EQ(a.backend, "ofi");
  EXPECT_NE(a.summary.find("cannot keep ZeRO in GPU memory"), std::string::npos) << a.summary;
}

TEST(Arrangement, RanksSharingAGpuStayDeviceResidentOverOfi) {
  ArrangementInputs in = inputs(true, false, true);
  in.ranks_share_a_gpu = true;
  Arrangement a = choose_arrangement(in);
  EXPECT_TRUE(a.zero_on_gpu);
  EXPECT_EQ(a.backend, "ofi");
  EXPECT_NE(a.summary.find("ranks share a GPU"), std::string::npos) << a.summary;
  in.backend_request = "nccl";  // asked for: NCCL itself then says what is wrong
  EXPECT_EQ(choose_arrangement(in).backend, "nccl");
  in = inputs(true, true, true);  // offload: host buffers, ofi as always
  in.ranks_share_a_gpu = true;
  a = choose_arrangement(in);
  EXPECT_FALSE(a.zero_on_gpu);
  EXPECT_EQ(a.summary.find("share"), std::string::npos) << a.summary;
}

TEST(Arrangement, AnExplicitBackendIsHonouredOrRefusedWithTheReason) {
  EXPECT_EQ(choose_arrangement(inputs(true, false, true, "ofi")).backend,
            "ofi");  // ofi stages GPU memory
  try {
    choose_arrangement(inputs(true, true, true, "nccl"));
    FAIL() << "nccl with host buffers must be refused";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_arrangement(inputs(false, false, true, "mpi")), dsx::Error);
}

}  // namespace
