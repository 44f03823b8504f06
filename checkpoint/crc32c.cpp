// CRC32C: the dispatch to the fastest kernel this CPU runs (crc32c_kernels.h), the slicing-by-8
// table version every CPU runs, the three-stream crc32-instruction version, and combining.
#include "checkpoint/crc32c.h"

#include <array>
#include <cstring>

#include "checkpoint/crc32c_kernels.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace dsx::checkpoint {
namespace detail {
namespace {

constexpr uint32_t kPolynomial = kCrc32cPolynomial;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    t[0][i] = crc;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32c_register_portable(uint32_t crc, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian hosts only (x86-64, aarch64)
    word ^= crc;
    crc = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^
          kTables[5][(word >> 16) & 0xff] ^ kTables[4][(word >> 24) & 0xff] ^
          kTables[3][(word >> 32) & 0xff] ^ kTables[2][(word >> 40) & 0xff] ^
          kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
namespace {

// Shifting a CRC state over `n` zero bytes is linear over GF(2): a 32x32 bit matrix, stored as
// the images of the 32 unit vectors. It lets three independent streams be joined into one.
using Operator = std::array<uint32_t, 32>;

uint32_t apply(const Operator& op, uint32_t state) {
  uint32_t out = 0;
  for (int bit = 0; state; ++bit, state >>= 1)
    if (state & 1) out ^= op[bit];
  return out;
}

Operator compose(const Operator& a, const Operator& b) {  // a after b
  Operator out{};
  for (int i = 0; i < 32; ++i) out[i] = apply(a, b[i]);
  return out;
}

// The operator that feeds `bytes` zero bytes through the (reflected) CRC register.
Operator zero_bytes_operator(size_t bytes) {
  Operator bit{};  // one zero bit: state >> 1, folding in the polynomial when bit 0 falls out
  bit[0] = kPolynomial;
  for (int i = 1; i < 32; ++i) bit[i] = 1u << (i - 1);
  Operator byte = bit;
  for (int i = 0; i < 3; ++i) byte = compose(byte, byte);  // 8 bits
  Operator result{};
  for (int i = 0; i < 32; ++i) result[i] = 1u << i;  // identity
  for (Operator power = byte; bytes; bytes >>= 1, power = compose(power, power))
    if (bytes & 1) result = compose(power, result);
  return result;
}

// The operator as four byte-indexed tables, so applying it costs four lookups.
struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t;
  explicit ShiftTables(size_t bytes) {
    const Operator op = zero_bytes_operator(bytes);
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = apply(op, b << (8 * k));
  }
  uint32_t shift(uint32_t state) const {
    return t[0][state & 0xff] ^ t[1][(state >> 8) & 0xff] ^ t[2][(state >> 16) & 0xff] ^
           t[3][state >> 24];
  }
};

// The crc32 instruction has a latency of three cycles but accepts one per cycle: three streams
// over adjacent blocks keep it busy; their states are then joined with the shift tables.
constexpr size_t kBlock = 8192;

}  // namespace

__attribute__((target("sse4.2"))) uint32_t crc32c_register_sse42(uint32_t crc, const uint8_t* p,
                                                                 size_t n) {
  static const ShiftTables shift_block(kBlock);
  uint64_t c0 = crc;
  while (n >= 3 * kBlock) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + kBlock + i, 8);
      std::memcpy(&w2, p + 2 * kBlock + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    c0 = shift_block.shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c0 = shift_block.shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c2);
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c0 = _mm_crc32_u64(c0, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c0);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

#endif

}  // namespace detail

namespace {

using Kernel = uint32_t (*)(uint32_t, const uint8_t*, size_t);

Kernel kernel_of(Crc32cKernel kernel) {
  switch (kernel) {
#if defined(__x86_64__)
    case Crc32cKernel::Sse42: return detail::crc32c_register_sse42;
    case Crc32cKernel::Pclmul: return detail::crc32c_register_pclmul;
    case Crc32cKernel::Vpclmul: return detail::crc32c_register_vpclmul;
#endif
    default: return detail::crc32c_register_portable;
  }
}

Crc32cKernel fastest_kernel() {
  static const Crc32cKernel best = [] {
    // 128-bit PCLMULQDQ folding ran at half the three-stream crc32 instruction's speed on the
    // Zen 5 this was measured on (bench_checkpoint's CRC rows), so it comes last.
    for (auto k : {Crc32cKernel::Vpclmul, Crc32cKernel::Sse42, Crc32cKernel::Pclmul})
      if (crc32c_kernel_available(k)) return k;
    return Crc32cKernel::Portable;
  }();
  return best;
}

// x^(8 * bytes) mod P, reflected, for shifting a CRC over `bytes` bytes (zlib's method: powers
// x^(2^k) squared up once, multiplied for the bits of the count).
uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 0x80000000u; bit; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b >> 1) ^ ((b & 1) ? detail::kCrc32cPolynomial : 0);
  }
  return product;
}

uint32_t x_power_of_bytes(uint64_t bytes) {
  static const std::array<uint32_t, 64> powers = [] {  // x^(2^k)
    std::array<uint32_t, 64> p{};
    p[0] = 0x40000000u;  // x^1
    for (size_t k = 1; k < p.size(); ++k) p[k] = multiply_mod_p(p[k - 1], p[k - 1]);
    return p;
  }();
  uint32_t result = 0x80000000u;  // x^0
  for (int k = 3; bytes; bytes >>= 1, ++k)  // 8 * bytes: start at x^(2^3)
    if (bytes & 1) result = multiply_mod_p(result, powers[static_cast<size_t>(k) % 64]);
  return result;
}

}  // namespace

bool crc32c_kernel_available(Crc32cKernel kernel) {
#if defined(__x86_64__)
  switch (kernel) {
    case Crc32cKernel::Portable: return true;
    case Crc32cKernel::Sse42: return __builtin_cpu_supports("sse4.2");
    case Crc32cKernel::Pclmul:
      return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    case Crc32cKernel::Vpclmul:
      return crc32c_kernel_available(Crc32cKernel::Pclmul) &&
             __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("vpclmulqdq");
  }
  return false;
#else
  return kernel == Crc32cKernel::Portable;
#endif
}

const char* crc32c_kernel_name(Crc32cKernel kernel) {
  switch (kernel) {
    case Crc32cKernel::Portable: return "slicing-by-8 tables";
    case Crc32cKernel::Sse42: return "SSE4.2 crc32, 3 streams";
    case Crc32cKernel::Pclmul: return "PCLMULQDQ folding, 4 streams";
    case Crc32cKernel::Vpclmul: return "AVX-512 VPCLMULQDQ folding, 16 streams";
  }
  return "?";
}

Crc32cKernel crc32c_fastest_kernel() { return fastest_kernel(); }

uint32_t crc32c_extend_with(Crc32cKernel kernel, uint32_t crc, const void* data, size_t size) {
  return ~kernel_of(kernel)(~crc, static_cast<const uint8_t*>(data), size);
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  static const Kernel best = kernel_of(fastest_kernel());
  return ~best(~crc, static_cast<const uint8_t*>(data), size);
}

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size) {
  return crc32c_extend_with(Crc32cKernel::Portable, crc, data, size);
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  return multiply_mod_p(x_power_of_bytes(size_b), crc_a) ^ crc_b;
}

}  // namespace dsx::checkpoint
