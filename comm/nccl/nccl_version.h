// What the NCCL library loaded at run time can do. The header we compiled against may be newer
// than the libnccl.so the loader finds, so features are checked against ncclGetVersion's code.
// Pure functions (no NCCL needed): built and tested in CPU-only builds too.
#pragma once

#include <string>

#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace dsx::comm::nccl {

struct NcclVersion {
  int major = 0, minor = 0, patch = 0;
  std::string text() const;  // "2.10.3"
};

// ncclGetVersion's code: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 +
// patch before.
NcclVersion decode_nccl_version(int code);

// The first version with bf16 (ncclBfloat16) and ncclAvg: 2.10.
inline constexpr NcclVersion kNcclBf16AndAvg{2, 10, 0};

// Throws Error(Unsupported), naming the operation, the loaded version and the one needed, when
// this NCCL cannot run `dtype` with `op`.
void require_nccl_support(int version_code, kernels::DType dtype, kernels::ReduceOp op, const std::string& operation);
// The same for operations without a reduction (allgather, broadcast, send, recv).
void require_nccl_support(int version_code, kernels::DType dtype, const std::string& operation);

}  // namespace dsx::comm::nccl
