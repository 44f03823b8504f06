// Finds the CUDA runtime, the driver, cuBLAS, cuDNN and NCCL with dlopen at run time and asks
// each for its version, so `dsx report` works (and says what is missing) on hosts without a
// GPU, a driver or a CUDA toolkit, and in CPU-only builds.
#pragma once

#include "tools/report/environment.h"

namespace dsx::report {

CudaStack probe_cuda_libraries();

// Version codes to text: cudart/driver 12040 → "12.4"; NCCL 22809 → "2.28.9" (and the pre-2.9
// scheme 2708 → "2.7.8"); cuDNN 91900 → "9.19.0" (and v8's 8907 → "8.9.7").
std::string cuda_version_text(int code);
std::string nccl_version_text(int code);
std::string cudnn_version_text(int code);

}  // namespace dsx::report
