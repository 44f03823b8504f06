// The CRC32C implementations behind crc32c_extend, one per instruction set, for crc32c.cpp's
// dispatch and for the tests that compare each with the portable table version. Each takes and
// returns the raw register (already inverted by the caller), so they chain and compare directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::checkpoint::detail {

inline constexpr uint32_t kCrc32cPolynomial = 0x82f63b78u;  // Castagnoli, reflected

uint32_t crc32c_register_portable(uint32_t state, const uint8_t* p, size_t n);

#if defined(__x86_64__)
// SSE4.2's crc32 instruction, three streams over 8 KiB blocks.
uint32_t crc32c_register_sse42(uint32_t state, const uint8_t* p, size_t n);
// Carry-less-multiply folding (crc32c_clmul.cpp): 4 x 16-byte streams with PCLMULQDQ, or
// 4 x 64-byte streams with AVX-512 VPCLMULQDQ; short inputs and tails go to the crc32 instruction.
uint32_t crc32c_register_pclmul(uint32_t state, const uint8_t* p, size_t n);
uint32_t crc32c_register_vpclmul(uint32_t state, const uint8_t* p, size_t n);
#endif

}  // namespace dsx::checkpoint::detail
