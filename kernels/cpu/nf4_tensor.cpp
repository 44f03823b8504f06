// Nf4Tensor: quantising a matrix (with optional double quantisation) and the tiled linear layer.
#include "kernels/nf4_tensor.h"

#include <algorithm>
#include <string>

#include "dsx/error.h"
#include "kernels/cpu/gemm.h"

namespace dsx::kernels {
namespace {

Nf4NestedAbsmax double_quantize(const std::vector<float>& absmax) {
  Nf4NestedAbsmax nested;
  // bnb: offset = absmax.mean() in fp32; a double sum rounded once is the exact mean's float.
  double sum = 0.0;
  for (float a : absmax) sum += a;
  nested.offset = static_cast<float>(sum / static_cast<double>(absmax.size()));
  std::vector<float> centred(absmax.size());
  for (size_t b = 0; b < absmax.size(); ++b) centred[b] = absmax[b] - nested.offset;
  auto code = dynamic_code8();
  nested.code.assign(code.begin(), code.end());
  int64_t n = static_cast<int64_t>(absmax.size());
  nested.codes.resize(absmax.size());
  nested.absmax.resize(static_cast<size_t>(nf4_blocks(n, nested.blocksize)));
  code8_quantize(nested.codes.data(), nested.absmax.data(), centred.data(), n, nested.blocksize,
                 nested.code.data());
  return nested;
}

}  // namespace

size_t Nf4Tensor::storage_bytes() const {
  size_t bytes = packed.size() + absmax.size() * sizeof(float);
  if (nested)
    bytes += nested->codes.size() +
             (nested->absmax.size() + nested->code.size() + 1) * sizeof(float);  // + the offset
  return bytes;
}

Nf4Tensor nf4_quantize_matrix(const void* w, DType w_type, int64_t rows, int64_t cols,
                              const Nf4Options& options) {
  // bitsandbytes' blocksizes; an even one also keeps every block on whole bytes.
  const int bs = options.blocksize;
  if (bs < 32 || bs > 4096 || (bs & (bs - 1)) || rows < 0 || cols < 0)
    throw Error(ErrorKind::Usage,
                "NF4 needs a blocksize that is a power of two from 32 to 4096 "
                "(bitsandbytes' 64 by default) and a non-negative shape; got "
                "blocksize " +
                    std::to_string(bs) + ", shape [" + std::to_string(rows) + ", " +
                    std::to_string(cols) + "]");
  Nf4Tensor t;
  t.rows = rows;
  t.cols = cols;
  t.blocksize = options.blocksize;
  t.compute = options.compute;
  t.packed.resize(static_cast<size_t>(nf4_packed_bytes(t.numel())));
  t.absmax.resize(static_cast<size_t>(t.blocks()));
  nf4_quantize(t.packed.data(), t.absmax.data(), w, w_type, t.numel(), t.blocksize);
  if (options.double_quant) {
    t.nested = double_quantize(t.absmax);
    std::vector<float>().swap(t.absmax);  // freed, not just emptied: 4 bytes a block otherwise
  }
  return t;
}

void nf4_absmax_range(float* absmax, const Nf4Tensor& w, int64_t first, int64_t count) {
  if (!w.nested) {
    std::copy_n(w.absmax.begin() + first, count, absmax);
    return;
  }
  const Nf4NestedAbsmax& n = *w.nested;
  nf4_nested_absmax(absmax, n.codes.data(), n.absmax.data(), n.code.data(), n.offset, n.blocksize,
                    first, count);
}

namespace {

// Elements [begin, end) of W, block by block: one absmax load per block and a 16-entry table for
// the codes; the same products and rounding as nf4_dequantize_element and round_to_dtype.
template <DType kCompute>
void dequantize_range(float* out, const Nf4Tensor& w, const float* absmax, int64_t first_block,
                      int64_t begin, int64_t end) {
  float code[16];
  for (unsigned i = 0; i < 16; ++i) code[i] = nf4_value(i);
  const int64_t last_block = (end - 1) / w.blocksize;
#pragma omp parallel for schedule(static) if (end - begin >= (int64_t{1} << 18))
  for (int64_t b = first_block; b <= last_block; ++b) {
    const int64_t lo = std::max(begin, b * w.blocksize);
    const int64_t hi = std::min(end, (b + 1) * w.blocksize);
    const float scale = absmax[b - first_block];
    const uint8_t* packed = w.packed.data();
    int64_t i = lo;
    if (i & 1) {  // an odd start (odd cols): its low nibble first, then whole bytes
      out[i - begin] = round_to_dtype(kCompute, code[packed[i >> 1] & 15u] * scale);
      ++i;
    }
    for (; i + 1 < hi; i += 2) {
      const uint8_t byte = packed[i >> 1];
      out[i - begin] = round_to_dtype(kCompute, code[byte >> 4] * scale);
      out[i + 1 - begin] = round_to_dtype(kCompute, code[byte & 15u] * scale);
    }
    if (i < hi) out[i - begin] = round_to_dtype(kCompute, code[packed[i >> 1] >> 4] * scale);
  }
}

}  // namespace

void nf4_dequantize_rows(float* out, const Nf4Tensor& w, int64_t row0, int64_t nrows) {
  int64_t begin = row0 * w.cols, end = (row0 + nrows) * w.cols;
  if (end <= begin) return;
  int64_t first_block = begin / w.blocksize, last_block = (end - 1) / w.blocksize;
  std::vector<float> absmax(static_cast<size_t>(last_block - first_block + 1));
  nf4_absmax_range(absmax.data(), w, first_block, static_cast<int64_t>(absmax.size()));
  dispatch_dtype(w.compute, [&](auto tag) {
    dequantize_range<decltype(tag)::value>(out, w, absmax.data(), first_block, begin, end);
  });
}

void nf4_dequantize_matrix(void* out, DType out_type, const Nf4Tensor& w) {
  std::vector<float> absmax(static_cast<size_t>(w.blocks()));
  nf4_absmax_range(absmax.data(), w, 0, w.blocks());
  nf4_dequantize(out, out_type, w.packed.data(), absmax.data(), w.numel(), w.blocksize);
}

int64_t nf4_tile_rows(const Nf4Tensor& w) {
  // 1 MiB: 64 rows of a 4096-wide weight, enough rows for the BLAS to run at its pace.
  constexpr int64_t kTileFloats = 256 * 1024;
  return std::clamp<int64_t>(kTileFloats / std::max<int64_t>(w.cols, 1), 1,
                             std::max<int64_t>(w.rows, 1));
}

void nf4_linear_forward(float* y, const float* x, const Nf4Tensor& w, int64_t tokens) {
  int64_t tile_rows = nf4_tile_rows(w);
  std::vector<float> tile(static_cast<size_t>(tile_rows * w.cols));
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    int64_t nr = std::min(tile_rows, w.rows - r0);
    nf4_dequantize_rows(tile.data(), w, r0, nr);
    // y[:, r0:r0+nr] = x @ tile^T
    cpu::gemm<float>(false, true, tokens, nr, w.cols, 1.0f, x, w.cols, tile.data(), w.cols, 0.0f,
                     y + r0, w.rows);
  }
}

void nf4_linear_backward_input(float* dx, const float* dy, const Nf4Tensor& w, int64_t tokens,
                               bool accumulate) {
  int64_t tile_rows = nf4_tile_rows(w);
  std::vector<float> tile(static_cast<size_t>(tile_rows * w.cols));
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    int64_t nr = std::min(tile_rows, w.rows - r0);
    nf4_dequantize_rows(tile.data(), w, r0, nr);
    // dx += dy[:, r0:r0+nr] @ tile
    float beta = (r0 == 0 && !accumulate) ? 0.0f : 1.0f;
    cpu::gemm<float>(false, false, tokens, w.cols, nr, 1.0f, dy + r0, w.rows, tile.data(), w.cols,
                     beta, dx, w.cols);
  }
}

}  // namespace dsx::kernels
