// CRC32C by carry-less-multiply folding (Intel's "Fast CRC Computation Using PCLMULQDQ", for the
// reflected Castagnoli polynomial). A 128-bit block X of the message, D bits before the block it
// is folded into, is replaced by X * x^D reduced to 96 bits: its low half times (x^(D+31) mod P),
// its high half times (x^(D-33) mod P), each a 64x32-bit carry-less product. Several blocks are
// folded side by side (the multiplier's latency is hidden behind independent streams); at the end
// the one block left is turned into the CRC register by two crc32 instructions, which compute
// exactly "block * x^32 mod P", and the tail of under 16 bytes goes through crc32 too.
#include "checkpoint/crc32c_kernels.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and then warn that it is undefined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

namespace dsx::checkpoint::detail {
namespace {

// x^n mod P in the reflected 32-bit form (x^0 is bit 31): multiplying by x is a right shift,
// folding in the polynomial when x^31 (bit 0) moves out.
constexpr uint32_t reflected_x_power(unsigned n) {
  uint32_t v = 0x80000000u;
  for (unsigned i = 0; i < n; ++i) v = (v >> 1) ^ ((v & 1) ? kCrc32cPolynomial : 0);
  return v;
}

// The two multipliers that fold a 16-byte block forward by `bytes` bytes: low qword, high qword.
struct FoldConstant {
  uint64_t low, high;
};
constexpr FoldConstant fold_constant(unsigned bytes) {
  return {reflected_x_power(8 * bytes + 31), reflected_x_power(8 * bytes - 33)};
}

#define DSX_CLMUL_TARGET __attribute__((target("sse4.2,pclmul")))
#define DSX_VPCLMUL_TARGET \
  __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))

DSX_CLMUL_TARGET __m128i load_constant(FoldConstant k) {
  return _mm_set_epi64x(static_cast<long long>(k.high), static_cast<long long>(k.low));
}

// x * x^D folded onto `next` (the block D bits later).
DSX_CLMUL_TARGET inline __m128i fold16(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                     _mm_clmulepi64_si128(x, k, 0x11)),
                       next);
}

DSX_CLMUL_TARGET inline __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The last block and the tail: one 16-byte block at a time, then crc32 for the rest.
DSX_CLMUL_TARGET uint32_t finish(__m128i x, const uint8_t* p, size_t n) {
  const __m128i k16 = load_constant(fold_constant(16));
  for (; n >= 16; p += 16, n -= 16) x = fold16(x, k16, load16(p));
  uint64_t state = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  state = _mm_crc32_u64(state, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    state = _mm_crc32_u64(state, word);
  }
  auto state32 = static_cast<uint32_t>(state);
  while (n--) state32 = _mm_crc32_u8(state32, *p++);
  return state32;
}

DSX_VPCLMUL_TARGET inline __m512i fold64(__m512i x, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96);
}

DSX_VPCLMUL_TARGET inline __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }

DSX_VPCLMUL_TARGET __m512i broadcast_constant(FoldConstant k) {
  return _mm512_broadcast_i32x4(load_constant(k));
}

}  // namespace

DSX_CLMUL_TARGET uint32_t crc32c_register_pclmul(uint32_t state, const uint8_t* p, size_t n) {
  if (n < 64) return crc32c_register_sse42(state, p, n);
  // The register enters as the first 32 bits of the message, xor'ed in.
  __m128i x0 = _mm_xor_si128(load16(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x1 = load16(p + 16), x2 = load16(p + 32), x3 = load16(p + 48);
  p += 64;
  n -= 64;
  const __m128i k64 = load_constant(fold_constant(64));
  for (; n >= 64; p += 64, n -= 64) {
    x0 = fold16(x0, k64, load16(p));
    x1 = fold16(x1, k64, load16(p + 16));
    x2 = fold16(x2, k64, load16(p + 32));
    x3 = fold16(x3, k64, load16(p + 48));
  }
  const __m128i k16 = load_constant(fold_constant(16));
  x1 = fold16(x0, k16, x1);
  x2 = fold16(x1, k16, x2);
  x3 = fold16(x2, k16, x3);
  return finish(x3, p, n);
}

DSX_VPCLMUL_TARGET uint32_t crc32c_register_vpclmul(uint32_t state, const uint8_t* p, size_t n) {
  if (n < 256) return crc32c_register_pclmul(state, p, n);
  __m512i x0 = _mm512_xor_si512(load64(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state))));
  __m512i x1 = load64(p + 64), x2 = load64(p + 128), x3 = load64(p + 192);
  p += 256;
  n -= 256;
  const __m512i k256 = broadcast_constant(fold_constant(256));
  for (; n >= 256; p += 256, n -= 256) {
    x0 = fold64(x0, k256, load64(p));
    x1 = fold64(x1, k256, load64(p + 64));
    x2 = fold64(x2, k256, load64(p + 128));
    x3 = fold64(x3, k256, load64(p + 192));
  }
  const __m512i k64 = broadcast_constant(fold_constant(64));
  x1 = fold64(x0, k64, x1);
  x2 = fold64(x1, k64, x2);
  x3 = fold64(x2, k64, x3);
  for (; n >= 64; p += 64, n -= 64) x3 = fold64(x3, k64, load64(p));
  // The four 16-byte lanes, earliest first, folded onto the last one.
  __m128i x = _mm512_extracti32x4_epi32(x3, 3);
  x = fold16(_mm512_extracti32x4_epi32(x3, 2), load_constant(fold_constant(16)), x);
  x = fold16(_mm512_extracti32x4_epi32(x3, 1), load_constant(fold_constant(32)), x);
  x = fold16(_mm512_castsi512_si128(x3), load_constant(fold_constant(48)), x);
  return finish(x, p, n);
}

}  // namespace dsx::checkpoint::detail
#endif
