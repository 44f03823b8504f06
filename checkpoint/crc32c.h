// CRC32C (Castagnoli), the checksum of checkpoint manifests and of TensorBoard's TFRecord framing.
// Uses the SSE4.2 crc32 instruction where the CPU has it and a slicing-by-8 table otherwise; both
// give the same value (tested against RFC 3720's vectors).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::checkpoint {

// Continues a running CRC: crc32c_extend(crc32c_extend(0, a), b) == crc32c(a ++ b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

// The table-driven version alone (what CPUs without SSE4.2 run); the tests compare the two.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

// TFRecord's masked form: rotating and offsetting keeps a CRC of bytes that themselves contain
// CRCs from being trivially predictable (as TensorFlow's record writer does).
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace dsx::checkpoint
