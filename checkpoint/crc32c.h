// CRC32C (Castagnoli), the checksum of checkpoint manifests and of TensorBoard's TFRecord framing.
// Runs the fastest kernel the CPU has, chosen once: AVX-512 VPCLMULQDQ folding (memory speed),
// else the SSE4.2 crc32 instruction in three streams, else 128-bit PCLMULQDQ folding, else a
// slicing-by-8 table; all give the same value (tested against RFC 3720's vectors and against
// each other at every length and alignment).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::checkpoint {

// Continues a running CRC: crc32c_extend(crc32c_extend(0, a), b) == crc32c(a ++ b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

// The table-driven version alone (what CPUs without SSE4.2 run); the tests compare the two.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

// The CRC of a ++ b from crc32c(a), crc32c(b) and b's size: pieces of one file checksummed apart
// (in parallel, or as they arrive) give the file's CRC.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

// The kernels, for tests and benchmarks; crc32c_extend runs crc32c_fastest_kernel().
enum class Crc32cKernel { Portable, Sse42, Pclmul, Vpclmul };
bool crc32c_kernel_available(Crc32cKernel kernel);  // this CPU runs it
Crc32cKernel crc32c_fastest_kernel();
const char* crc32c_kernel_name(Crc32cKernel kernel);
uint32_t crc32c_extend_with(Crc32cKernel kernel, uint32_t crc, const void* data, size_t size);

// TFRecord's masked form: rotating and offsetting keeps a CRC of bytes that themselves contain
// CRCs from being trivially predictable (as TensorFlow's record writer does).
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace dsx::checkpoint
