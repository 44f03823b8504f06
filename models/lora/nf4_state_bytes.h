// An NF4 tensor's stored state (kernels/nf4_tensor.h) as one run of bytes: the packed codes, then
// the absmax (fp32), or under double quantisation the 8-bit absmax codes and the nested fp32
// absmax. A ZeRO stage 3 rank keeps a share of such bytes and gathers them whole per layer
// (engine/partitioned_nf4_frozen_weights.h). Not here: the shape, blocksize, compute dtype and
// the nested code and offset, a few hundred bytes per tensor that every rank keeps whole.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/nf4_tensor.h"

namespace dsx::models {

// Bytes of `t`'s state as nf4_write_state lays it out.
size_t nf4_state_bytes(const kernels::Nf4Tensor& t);

// out: nf4_state_bytes(t) bytes.
void nf4_write_state(uint8_t* out, const kernels::Nf4Tensor& t);

// Fills t's packed codes and absmax (or nested codes and absmax) from `in`, as written by
// nf4_write_state for a tensor of t's shape and settings.
void nf4_read_state(kernels::Nf4Tensor& t, const uint8_t* in);

// Frees the state nf4_read_state filled; the shape and settings stay.
void nf4_drop_state(kernels::Nf4Tensor& t);

// `t` without its state: what a rank keeps of a tensor between gathers.
kernels::Nf4Tensor nf4_settings_of(const kernels::Nf4Tensor& t);

}  // namespace dsx::models
