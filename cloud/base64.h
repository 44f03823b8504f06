// Standard base64 (RFC 4648, with padding, no line breaks): EC2 launch templates take user data
// as base64 text that the caller encodes (shared/ref/cloud.md 1.4).
#pragma once

#include <string>
#include <string_view>

namespace dsx::cloud {

std::string base64_encode(std::string_view bytes);

// Throws dsx::Error(Format) on characters outside the alphabet or a bad length.
std::string base64_decode(std::string_view text);

}  // namespace dsx::cloud
