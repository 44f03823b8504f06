// Protobuf wire format, as much as reading a few scalar fields needs: each field is a varint key
// (field number << 3 | wire type) and a value: a varint (0), 8 bytes (1), a length and that many
// bytes (2: strings and nested messages), or 4 bytes (5).
#include "tokenizer/sentencepiece_spec.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace dsx::tokenizer {
namespace {

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}

  // Calls on_field(number, wire_type, varint value or 0, bytes of a length-delimited field) for
  // each field; false when the message is cut short.
  bool each_field(
      const std::function<void(uint32_t, uint32_t, uint64_t, std::string_view)>& on_field) {
    while (pos_ < bytes_.size()) {
      auto key = varint();
      if (!key) return false;
      const auto number = static_cast<uint32_t>(*key >> 3), type = static_cast<uint32_t>(*key & 7);
      uint64_t value = 0;
      std::string_view nested;
      if (type == 0) {
        auto v = varint();
        if (!v) return false;
        value = *v;
      } else if (type == 2) {
        auto length = varint();
        if (!length || *length > bytes_.size() - pos_) return false;
        nested = bytes_.substr(pos_, *length);
        pos_ += *length;
      } else if (type == 1 || type == 5) {
        const size_t size = type == 1 ? 8 : 4;
        if (size > bytes_.size() - pos_) return false;
        pos_ += size;
      } else {
        return false;  // groups (3, 4) are not in sentencepiece_model.proto
      }
      on_field(number, type, value, nested);
    }
    return true;
  }

 private:
  std::optional<uint64_t> varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < bytes_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return value;
    }
    return std::nullopt;
  }

  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

SentencePieceSpec read_sentencepiece_spec(std::string_view model_proto) {
  SentencePieceSpec spec;
  SentencePieceSpec read = spec;
  bool ok = true;
  ok &= WireReader(model_proto).each_field([&](uint32_t field, uint32_t type, uint64_t,
                                                   std::string_view nested) {
    if (type != 2) return;
    if (field == 2) {  // TrainerSpec
      ok &= WireReader(nested).each_field([&](uint32_t f, uint32_t t, uint64_t v, std::string_view) {
        if (t != 0) return;
        if (f == 3) read.model_type = static_cast<SentencePieceSpec::ModelType>(v);
        if (f == 24) read.treat_whitespace_as_suffix = v != 0;
      });
    } else if (field == 3) {  // NormalizerSpec
      ok &= WireReader(nested).each_field([&](uint32_t f, uint32_t t, uint64_t v, std::string_view s) {
        if (f == 2 && t == 2) read.has_charsmap = !s.empty();
        if (t != 0) return;
        if (f == 3) read.add_dummy_prefix = v != 0;
        if (f == 4) read.remove_extra_whitespaces = v != 0;
        if (f == 5) read.escape_whitespaces = v != 0;
      });
    }
  });
  return ok ? read : spec;
}

}  // namespace dsx::tokenizer
