// `--world_info`: how the runner tells each node agent the whole world. Byte-identical to
// DeepSpeed: URL-safe base64 (with '=' padding) of json.dumps({host: [slots]}) with Python's
// default separators, so a dsx agent and `python -m deepspeed.launcher.launch` are
// interchangeable. Decoding is lenient (any JSON spacing, padding optional).
#pragma once

#include <string>

#include "launcher/world.h"

namespace dsx::launcher {

std::string world_to_json(const World& world);
std::string encode_world_info(const World& world);

// Throws dsx::Error(Usage) naming what is wrong with the text.
World decode_world_info(const std::string& encoded);

std::string base64_urlsafe_encode(const std::string& bytes);
std::string base64_urlsafe_decode(const std::string& text);  // throws on bad characters

}  // namespace dsx::launcher
