// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes |
//   data | uint32 masked CRC32C of data
// The reader checks both CRCs and names the byte offset of a damaged or cut-off record.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::engine::monitor {

// Appends one framed record holding `data` to `out`.
void append_tfrecord(std::string& out, std::string_view data);

// Splits a whole file into its records. Throws dsx::Error(Format) naming `origin` and the offset
// when a CRC does not match or the last record is cut off.
std::vector<std::string> read_tfrecords(std::string_view bytes, const std::string& origin);

}  // namespace dsx::engine::monitor
