// The nccl backend's run-time version rule: bf16 and ncclAvg exist from NCCL 2.10 on; an older
// libnccl is refused with a message naming the operation and both versions.
#include <gtest/gtest.h>

#include <string>

#include "comm/nccl/nccl_version.h"
#include "dsx/error.h"

namespace dsx::comm::nccl {
namespace {

using kernels::DType;
using kernels::ReduceOp;

TEST(NcclVersion, BothEncodingsOfNcclGetVersionDecode) {
  EXPECT_EQ(decode_nccl_version(2804).text(), "2.8.4");    // before 2.9: major*1000 + minor*100 + patch
  EXPECT_EQ(decode_nccl_version(20906).text(), "2.9.6");   // since 2.9: major*10000 + minor*100 + patch
  EXPECT_EQ(decode_nccl_version(21003).text(), "2.10.3");
  EXPECT_EQ(decode_nccl_version(22703).text(), "2.27.3");
}

std::string refusal(int code, DType dtype, ReduceOp op) {
  try {
    require_nccl_support(code, dtype, op, "allreduce");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    return e.what();
  }
  return "";
}

TEST(NcclVersion, Bf16AndAvgNeed2Point10) {
  const std::string bf16 = refusal(20906, DType::BF16, ReduceOp::Sum);
  EXPECT_NE(bf16.find("bf16"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("2.9.6"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("2.10.0"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("allreduce"), std::string::npos) << bf16;
  const std::string avg = refusal(2804, DType::F32, ReduceOp::Avg);
  EXPECT_NE(avg.find("ncclAvg"), std::string::npos) << avg;
  EXPECT_NE(avg.find("2.8.4"), std::string::npos) << avg;
  EXPECT_THROW(require_nccl_support(20906, DType::BF16, "allgather"), Error);
}

TEST(NcclVersion, WhatOlderNcclHasIsAccepted) {
  EXPECT_EQ(refusal(2804, DType::F32, ReduceOp::Sum), "");
  EXPECT_EQ(refusal(20906, DType::F16, ReduceOp::Max), "");
  EXPECT_NO_THROW(require_nccl_support(2804, DType::F16, "send"));
}

TEST(NcclVersion, From2Point10EverythingIsAccepted) {
  for (int code : {21003, 21805, 22703}) {
    EXPECT_EQ(refusal(code, DType::BF16, ReduceOp::Avg), "") << code;
    EXPECT_NO_THROW(require_nccl_support(code, DType::BF16, "broadcast"));
  }
}

}  // namespace
}  // namespace dsx::comm::nccl
