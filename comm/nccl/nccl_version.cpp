// NCCL version rules (see nccl_version.h).
#include "comm/nccl/nccl_version.h"

#include <tuple>

#include "dsx/error.h"

namespace dsx::comm::nccl {

namespace {

bool at_least(const NcclVersion& v, const NcclVersion& want) {
  return std::tie(v.major, v.minor, v.patch) >= std::tie(want.major, want.minor, want.patch);
}

void refuse(const NcclVersion& v, const std::string& what, const std::string& operation) {
  throw Error(ErrorKind::Unsupported, "nccl backend: " + operation + " needs " + what + ", which NCCL has since " +
                                          kNcclBf16AndAvg.text() + "; the loaded libnccl is " + v.text() +
                                          ". Install a newer NCCL (or point LD_LIBRARY_PATH at one), or use fp32 / Sum");
}

}  // namespace

std::string NcclVersion::text() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

NcclVersion decode_nccl_version(int code) {
  if (code >= 10000) return {code / 10000, (code % 10000) / 100, code % 100};
  return {code / 1000, (code % 1000) / 100, code % 100};
}

void require_nccl_support(int version_code, kernels::DType dtype, const std::string& operation) {
  const NcclVersion v = decode_nccl_version(version_code);
  if (dtype == kernels::DType::BF16 && !at_least(v, kNcclBf16AndAvg)) refuse(v, "bf16 (ncclBfloat16)", operation);
}

void require_nccl_support(int version_code, kernels::DType dtype, kernels::ReduceOp op, const std::string& operation) {
  require_nccl_support(version_code, dtype, operation);
  const NcclVersion v = decode_nccl_version(version_code);
  if (op == kernels::ReduceOp::Avg && !at_least(v, kNcclBf16AndAvg)) refuse(v, "the average (ncclAvg)", operation);
}

}  // namespace dsx::comm::nccl
