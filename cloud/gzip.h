// gzip (RFC 1952) of a text, for EC2 user data: cloud-init unpacks gzip user data before it
// runs it, which makes room for a node script over EC2's 16 KB.
#pragma once

#include <string>
#include <string_view>

namespace dsx::cloud {

// False when dsx was built without zlib (then gzip throws).
bool gzip_available();

// The gzip member of `text`; throws dsx::Error(Unsupported) without zlib.
std::string gzip(std::string_view text);

}  // namespace dsx::cloud
