// CPU loops of kernels/nf4.h. Plain loops: quantising happens once at load, and the matmul path
// (nf4_tensor.cpp) dequantises one tile at a time through nf4_dequantize.
#include "kernels/nf4.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsx::kernels {
namespace {

// One block's NF4 indices into `index` (size end - begin).
void nf4_quantize_block(uint8_t* index, float* absmax, const void* x, DType x_type, int64_t begin,
                        int64_t end, bool full_block) {
  float amax = 0.0f;
  for (int64_t i = begin; i < end; ++i)
    amax = std::max(amax, std::fabs(load_as_float(x_type, x, static_cast<size_t>(i))));
  float divisor = std::max(amax, kNf4MinAbsmax);
  // bnb stores the clamped value only for a partial last block.
  *absmax = full_block ? amax : divisor;
  float reciprocal = 1.0f / divisor;
  for (int64_t i = begin; i < end; ++i) {
    float v = load_as_float(x_type, x, static_cast<size_t>(i));
    float scaled = full_block ? v * reciprocal : v / divisor;
    index[i - begin] = nf4_index(std::clamp(scaled, -1.0f, 1.0f));
  }
}

}  // namespace

void nf4_quantize(uint8_t* packed, float* absmax, const void* x, DType x_type, int64_t n,
                  int blocksize) {
  std::vector<uint8_t> index(static_cast<size_t>(blocksize) + 1, 0);
  for (int64_t b = 0; b < nf4_blocks(n, blocksize); ++b) {
    int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
    nf4_quantize_block(index.data(), &absmax[b], x, x_type, begin, end, end - begin == blocksize);
    // Blocksizes are even, so a block starts on a byte; bnb pads an odd n with a scaled 0.
    for (int64_t i = begin; i < end; i += 2) {
      uint8_t odd = i + 1 < end ? index[i + 1 - begin] : nf4_index(0.0f);
      packed[i / 2] = nf4_pack(index[i - begin], odd);
    }
  }
}

void nf4_dequantize(void* out, DType out_type, const uint8_t* packed, const float* absmax,
                    int64_t n, int blocksize) {
  for (int64_t i = 0; i < n; ++i)
    store_from_float(out_type, out, static_cast<size_t>(i),
                     nf4_dequantize_element(packed, i, absmax[i / blocksize]));
}

// bnb's create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), sorted: for each
// exponent i in 0..6 the midpoints of linspace(0.1, 1, 2^i + 1) times 10^(i-6), both signs, then
// 0 and 1. Written out because torch's vectorised fp32 linspace rounds in its own order; the
// test compares this table with bnb's, value for value.
// clang-format off
std::array<float, 256> dynamic_code8() {
  return {
      -0.992968738f, -0.978906274f, -0.96484375f, -0.950781226f, -0.936718762f, -0.922656238f,
      -0.908593774f, -0.89453125f, -0.880468726f, -0.866406262f, -0.852343738f, -0.838281274f,
      -0.82421875f, -0.810156226f, -0.796093762f, -0.782031238f, -0.767968774f, -0.75390625f,
      -0.739843726f, -0.725781262f, -0.711718798f, -0.697656274f, -0.68359375f, -0.669531226f,
      -0.655468762f, -0.641406298f, -0.627343774f, -0.61328125f, -0.599218726f, -0.585156262f,
      -0.571093798f, -0.557031274f, -0.54296875f, -0.528906226f, -0.514843702f, -0.500781238f,
      -0.486718714f, -0.47265625f, -0.458593726f, -0.444531262f, -0.430468738f, -0.416406244f,
      -0.40234375f, -0.388281226f, -0.374218762f, -0.360156238f, -0.346093744f, -0.33203125f,
      -0.317968726f, -0.303906262f, -0.289843738f, -0.275781274f, -0.26171875f, -0.247656241f,
      -0.233593747f, -0.219531253f, -0.205468744f, -0.19140625f, -0.177343756f, -0.163281247f,
      -0.149218753f, -0.135156244f, -0.12109375f, -0.107031256f, -0.0985937491f, -0.0957812592f,
      -0.0929687545f, -0.0901562497f, -0.0873437524f, -0.0845312476f, -0.0817187577f, -0.078906253f,
      -0.0760937482f, -0.0732812509f, -0.0704687461f, -0.0676562563f, -0.0648437515f, -0.0620312504f,
      -0.0592187531f, -0.0564062484f, -0.053593751f, -0.05078125f, -0.047968749f, -0.0451562516f,
      -0.0423437469f, -0.0395312496f, -0.0367187522f, -0.0339062512f, -0.0310937501f, -0.028281251f,
      -0.0254687499f, -0.0226562507f, -0.0198437516f, -0.0170312505f, -0.0142187504f, -0.0114062503f,
      -0.00971874967f, -0.00915624946f, -0.00859375019f, -0.00803124998f, -0.00746874977f, -0.00690625003f,
      -0.00634374982f, -0.00578125007f, -0.00521875033f, -0.00465624966f, -0.00409374991f, -0.00353124971f,
      -0.00296874996f, -0.00240624999f, -0.00184375001f, -0.00128124992f, -0.000943750085f, -0.000831249985f,
      -0.00071875006f, -0.000606250076f, -0.000493750034f, -0.000381250022f, -0.000268750038f, -0.000156250011f,
      -8.87499991e-05f, -6.62500024e-05f, -4.37499984e-05f, -2.12499981e-05f, -7.7499999e-06f, -3.25000019e-06f,
      -5.50000038e-07f, 0.0f, 5.50000038e-07f, 3.25000019e-06f, 7.7499999e-06f, 2.12499981e-05f,
      4.37499984e-05f, 6.62500024e-05f, 8.87499991e-05f, 0.000156250011f, 0.000268750038f, 0.000381250022f,
      0.000493750034f, 0.000606250076f, 0.00071875006f, 0.000831249985f, 0.000943750085f, 0.00128124992f,
      0.00184375001f, 0.00240624999f, 0.00296874996f, 0.00353124971f, 0.00409374991f, 0.00465624966f,
      0.00521875033f, 0.00578125007f, 0.00634374982f, 0.00690625003f, 0.00746874977f, 0.00803124998f,
      0.00859375019f, 0.00915624946f, 0.00971874967f, 0.0114062503f, 0.0142187504f, 0.0170312505f,
      0.0198437516f, 0.0226562507f, 0.0254687499f, 0.028281251f, 0.0310937501f, 0.0339062512f,
      0.0367187522f, 0.0395312496f, 0.0423437469f, 0.0451562516f, 0.047968749f, 0.05078125f,
      0.053593751f, 0.0564062484f, 0.0592187531f, 0.0620312504f, 0.0648437515f, 0.0676562563f,
      0.0704687461f, 0.0732812509f, 0.0760937482f, 0.078906253f, 0.0817187577f, 0.0845312476f,
      0.0873437524f, 0.0901562497f, 0.0929687545f, 0.0957812592f, 0.0985937491f, 0.107031256f,
      0.12109375f, 0.135156244f, 0.149218753f, 0.163281247f, 0.177343756f, 0.19140625f,
      0.205468744f, 0.219531253f, 0.233593747f, 0.247656241f, 0.26171875f, 0.275781274f,
      0.289843738f, 0.303906262f, 0.317968726f, 0.33203125f, 0.346093744f, 0.360156238f,
      0.374218762f, 0.388281226f, 0.40234375f, 0.416406244f, 0.430468738f, 0.444531262f,
      0.458593726f, 0.47265625f, 0.486718714f, 0.500781238f, 0.514843702f, 0.528906226f,
      0.54296875f, 0.557031274f, 0.571093798f, 0.585156262f, 0.599218726f, 0.61328125f,
      0.627343774f, 0.641406298f, 0.655468762f, 0.669531226f, 0.68359375f, 0.697656274f,
      0.711718798f, 0.725781262f, 0.739843726f, 0.75390625f, 0.767968774f, 0.782031238f,
      0.796093762f, 0.810156226f, 0.82421875f, 0.838281274f, 0.852343738f, 0.866406262f,
      0.880468726f, 0.89453125f, 0.908593774f, 0.922656238f, 0.936718762f, 0.950781226f,
      0.96484375f, 0.978906274f, 0.992968738f, 1.0f,
  };
}
// clang-format on

void code8_quantize(uint8_t* q, float* absmax, const float* x, int64_t n, int blocksize,
                    const float* code) {
  for (int64_t b = 0; b < nf4_blocks(n, blocksize); ++b) {
    int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    absmax[b] = amax;
    float divisor = std::max(amax, kNf4MinAbsmax);
    for (int64_t i = begin; i < end; ++i)
      q[i] = code8_index(code, std::clamp(x[i] / divisor, -1.0f, 1.0f));
  }
}

void nf4_nested_absmax(float* absmax, const uint8_t* q, const float* nested_absmax,
                       const float* code, float offset, int nested_blocksize, int64_t first,
                       int64_t count) {
  for (int64_t b = first; b < first + count; ++b)
    absmax[b - first] =
        nf4_nested_absmax_element(q, nested_absmax, code, offset, nested_blocksize, b);
}

}  // namespace dsx::kernels
