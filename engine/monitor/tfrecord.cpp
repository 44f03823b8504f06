// TFRecord framing (see tfrecord.h), masked CRC32C from the checkpoint's CRC implementation.
#include "engine/monitor/tfrecord.h"

#include <cstdint>
#include <cstring>

#include "dsx/error.h"
#include "checkpoint/crc32c.h"

namespace dsx::engine::monitor {
namespace {

using checkpoint::crc32c;
using checkpoint::mask_crc32c;

void append_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t load_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

void append_tfrecord(std::string& out, std::string_view data) {
  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>(static_cast<uint64_t>(data.size()) >> (8 * i));
  out.append(length, 8);
  append_u32(out, mask_crc32c(crc32c(length, 8)));
  out.append(data);
  append_u32(out, mask_crc32c(crc32c(data.data(), data.size())));
}

std::vector<std::string> read_tfrecords(std::string_view bytes, const std::string& origin) {
  std::vector<std::string> records;
  size_t pos = 0;
  auto bad = [&](const std::string& what) {
    throw Error(ErrorKind::Format,
                origin + ": TFRecord at byte " + std::to_string(pos) + " " + what);
  };
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 12) bad("is cut off inside its length header");
    const char* p = bytes.data() + pos;
    uint64_t length = load_le(p, 8);
    if (load_le(p + 8, 4) != mask_crc32c(crc32c(p, 8))) bad("has a bad length CRC");
    if (length > bytes.size() - pos - 12 || bytes.size() - pos - 12 - length < 4)
      bad("is cut off: it announces " + std::to_string(length) + " bytes");
    const char* data = p + 12;
    if (load_le(data + length, 4) != mask_crc32c(crc32c(data, length))) bad("has a bad data CRC");
    records.emplace_back(data, length);
    pos += 12 + length + 4;
  }
  return records;
}

}  // namespace dsx::engine::monitor
