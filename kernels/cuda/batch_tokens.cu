// A micro-batch's tokens on the GPU (see batch_tokens.h): the counted targets and mean loss, and
// the rows grouped by token.
#include "kernels/cuda/batch_tokens.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/token_rows_sum.cuh"
#include "kernels/decoder_math.h"

namespace dsx::kernels::cuda {

namespace {

constexpr int kLossThreads = 256;
constexpr int kTile = 256;  // tokens per shared-memory tile, and threads per block, of the ranking

// Each thread counts its strided rows; thread 0 adds the counts and the losses in row order, as
// the CPU's decoder_mean_loss does, so both report the same sum.
__global__ void mean_loss_kernel(float* loss, int32_t* counted, const float* losses, const int32_t* targets,
                                 size_t N) {
  DSX_SHARED(int32_t, counts, kLossThreads);
  int32_t mine = 0;
  for (size_t i = threadIdx.x; i < N; i += blockDim.x) mine += decoder::crossentropy_counted(targets[i]) ? 1 : 0;
  counts[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x != 0) return;
  int32_t total = 0;
  for (int t = 0; t < kLossThreads; ++t) total += counts[t];
  float sum = 0.0f;
  for (size_t i = 0; i < N; ++i) sum += losses[i];
  *counted = total;
  *loss = total ? sum / static_cast<float>(total) : 0.0f;
}

// Row i's place in the rows sorted by (token, row): the rows with a smaller token plus the rows
// of its own token before it. sorted[place] = i; first[place] = 1 where i is its token's first row.
__global__ void rank_rows_kernel(int32_t* sorted, int32_t* first, const int32_t* tokens, size_t n) {
  DSX_SHARED(int32_t, tile, kTile);
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t token = i < n ? tokens[i] : 0;
  size_t smaller = 0, same_before = 0;
  for (size_t start = 0; start < n; start += kTile) {
    __syncthreads();  // the previous tile is read by all
    if (start + threadIdx.x < n) tile[threadIdx.x] = tokens[start + threadIdx.x];
    __syncthreads();
    const size_t count = n - start < size_t(kTile) ? n - start : size_t(kTile);
    for (size_t k = 0; k < count; ++k) {
      smaller += tile[k] < token;
      same_before += tile[k] == token && start + k < i;
    }
  }
  if (i >= n) return;
  sorted[smaller + same_before] = static_cast<int32_t>(i);
  first[smaller + same_before] = same_before == 0;
}

// One block packs the sorted rows: each thread takes a run of places, the runs' counts of first
// rows are scanned by thread 0, and each thread writes its tokens, offsets and rows.
__global__ void pack_groups_kernel(int32_t* grouped, const int32_t* sorted, const int32_t* first,
                                   const int32_t* tokens, size_t n) {
  DSX_SHARED(int32_t, before, kTile + 1);
  const size_t run = (n + blockDim.x - 1) / blockDim.x;
  const size_t begin = threadIdx.x * run < n ? threadIdx.x * run : n;
  const size_t end = begin + run < n ? begin + run : n;
  int32_t firsts = 0;
  for (size_t p = begin; p < end; ++p) firsts += first[p];
  before[threadIdx.x + 1] = firsts;
  __syncthreads();
  if (threadIdx.x == 0) {
    before[0] = 0;
    for (int t = 1; t <= kTile; ++t) before[t] += before[t - 1];
  }
  __syncthreads();
  const int32_t distinct = before[kTile];
  int32_t* token_of = grouped + 1;
  int32_t* offsets = token_of + distinct;
  int32_t* rows = offsets + distinct + 1;
  if (threadIdx.x == 0) grouped[0] = distinct, offsets[distinct] = static_cast<int32_t>(n);
  int32_t u = before[threadIdx.x];
  for (size_t p = begin; p < end; ++p) {
    rows[p] = sorted[p];
    if (first[p]) token_of[u] = tokens[sorted[p]], offsets[u] = static_cast<int32_t>(p), ++u;
  }
}

}  // namespace

void decoder_mean_loss(float* loss, int32_t* counted, const float* losses, const int32_t* targets, size_t N,
                       cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(loss, 4), DSX_WRITES(counted, 4), DSX_READS(losses, N * 4), DSX_READS(targets, N * 4));
  DSX_LAUNCH(1, kLossThreads, 0, stream, mean_loss_kernel)(loss, counted, losses, targets, N);
  check_launch("decoder_mean_loss");
}

void group_rows_by_token(int32_t* grouped, int32_t* scratch, const int32_t* tokens, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  int32_t* sorted = scratch;
  int32_t* first = scratch + n;
  DSX_TOUCHES(DSX_WRITES(scratch, grouped_rows_scratch(n) * 4), DSX_READS(tokens, n * 4));
  DSX_LAUNCH(static_cast<unsigned>((n + kTile - 1) / kTile), kTile, 0, stream, rank_rows_kernel)(sorted, first, tokens,
                                                                                                 n);
  check_launch("group_rows_by_token (rank)");
  DSX_TOUCHES(DSX_WRITES(grouped, grouped_rows_capacity(n) * 4), DSX_READS(scratch, grouped_rows_scratch(n) * 4),
              DSX_READS(tokens, n * 4));
  DSX_LAUNCH(1, kTile, 0, stream, pack_groups_kernel)(grouped, sorted, first, tokens, n);
  check_launch("group_rows_by_token (pack)");
}

template <class T>
void embedding_backward_grouped(T* dtable, const T* dout, const int32_t* grouped, size_t n, int C,
                                cudaStream_t stream) {
  if (n == 0) return;
  DSX_TOUCHES(DSX_READS(grouped, grouped_rows_capacity(n) * 4), DSX_READS(dout, n * C * sizeof(T)));
  add_grouped_rows(dtable, dout, grouped, n, C, stream);
  check_launch("embedding_backward_grouped");
}

template void embedding_backward_grouped<float>(float*, const float*, const int32_t*, size_t, int, cudaStream_t);
template void embedding_backward_grouped<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const int32_t*, size_t,
                                                        int, cudaStream_t);
template void embedding_backward_grouped<__half>(__half*, const __half*, const int32_t*, size_t, int, cudaStream_t);

}  // namespace dsx::kernels::cuda
