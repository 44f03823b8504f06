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

using Field = std::function<void(uint32_t, uint32_t, uint64_t, std::string_view)>;

Field trainer_spec(SentencePieceSpec& spec) {
  return [&spec](uint32_t field, uint32_t type, uint64_t value, std::string_view) {
    if (type != 0) return;
    if (field == 3) spec.model_type = static_cast<SentencePieceSpec::ModelType>(value);
    if (field == 24) spec.treat_whitespace_as_suffix = value != 0;
  };
}

Field normalizer_spec(SentencePieceSpec& spec) {
  return [&spec](uint32_t field, uint32_t type, uint64_t value, std::string_view bytes) {
    if (field == 2 && type == 2) spec.has_charsmap = !bytes.empty();
    if (type != 0) return;
    if (field == 3) spec.add_dummy_prefix = value != 0;
    if (field == 4) spec.remove_extra_whitespaces = value != 0;
    if (field == 5) spec.escape_whitespaces = value != 0;
  };
}

}  // namespace

SentencePieceSpec read_sentencepiece_spec(std::string_view model_proto) {
  SentencePieceSpec spec;
  bool ok = true;
  ok &= WireReader(model_proto)
            .each_field([&](uint32_t field, uint32_t type, uint64_t, std::string_view nested) {
              if (type == 2 && field == 2) ok &= WireReader(nested).each_field(trainer_spec(spec));
              if (type == 2 && field == 3) {
                ok &= WireReader(nested).each_field(normalizer_spec(spec));
              }
            });
  return ok ? spec : SentencePieceSpec{};
}

}  // namespace dsx::tokenizer
