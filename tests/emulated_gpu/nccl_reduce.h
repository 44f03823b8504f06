// NCCL's element types and reductions, as the emulated NCCL computes them: fp16 and bf16 (and
// fp32) accumulate in float, in rank order 0..n-1, so every rank gets bit-identical results.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace dsx::emu::nccl {

// 0 for a type the emulation does not handle (fp8).
size_t element_size(ncclDataType_t type);
const char* type_name(ncclDataType_t type);
const char* op_name(ncclRedOp_t op);
bool known_op(ncclRedOp_t op);

// out[i] = inputs[0][i] op inputs[1][i] op ... (n inputs; ncclAvg divides the sum by n).
// `out` may be one of the inputs.
void reduce(ncclDataType_t type, ncclRedOp_t op, const void* const* inputs, int n, void* out,
            size_t count);

}  // namespace dsx::emu::nccl
