// What a micro-batch's token ids give on the GPU, computed there so that the host never walks
// the B*T tokens of a step: the number of targets that count in the loss and the mean loss over
// them, and the rows grouped by token for the embedding's deterministic backward. The CPU twins
// are kernels/cpu/decoder_layers.h's decoder_mean_loss (same sum, in row order, in fp32) and
// kernels/token_rows.h's group_rows_by_token (the same groups, bit for bit). Pointers are device
// memory; every call only enqueues on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsx::kernels::cuda {

// *counted = the targets that count (decoder::crossentropy_counted), *loss = the N rows' losses
// summed in row order in fp32, divided by *counted (0 when none counts). One small block.
void decoder_mean_loss(float* loss, int32_t* counted, const float* losses, const int32_t* targets, size_t N,
                       cudaStream_t stream);

// The rows of `n` tokens grouped by token, as group_rows_by_token packs them, behind their
// number: grouped = [U | tokens (U) | offsets (U + 1) | rows (n)], U the distinct tokens, each
// token's rows ascending and the tokens ascending. `grouped` holds grouped_rows_capacity(n) ints,
// `scratch` grouped_rows_scratch(n) ints. Each row counts the rows before it in the sorted order
// (O(n^2) compares in shared-memory tiles: no atomics, no vocabulary-sized table).
void group_rows_by_token(int32_t* grouped, int32_t* scratch, const int32_t* tokens, size_t n, cudaStream_t stream);
inline constexpr size_t grouped_rows_capacity(size_t n) { return 3 * n + 2; }
inline constexpr size_t grouped_rows_scratch(size_t n) { return 2 * n; }

// dtable[token, :] += the rows of dout (n rows of C) holding that token, over the rows `grouped`
// by group_rows_by_token: each token's rows added in row order, no atomics, so the same bits
// every run (an embedding table's gradient: the Llama family's embed_tokens; GPT-2's wte goes
// through decoder_positional_embedding_backward, which sums the same way). T is float,
// __nv_bfloat16 or __half.
template <class T>
void embedding_backward_grouped(T* dtable, const T* dout, const int32_t* grouped, size_t n, int C,
                                cudaStream_t stream);

}  // namespace dsx::kernels::cuda
