// Protobuf's wire format, as much as ModelProto needs: each field is a varint key (number << 3 |
// wire type) and then a varint (type 0), 8 bytes (1), a length and that many bytes (2), or 4
// bytes (5). ModelProto: pieces = 1, trainer_spec = 2, normalizer_spec = 3. SentencePiece:
// piece = 1, score = 2 (float), type = 3. The settings' field numbers are in the header.
#include "tokenizer/sentencepiece_model_file.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "tokenizer/sentencepiece_charsmap.h"

namespace dsx::tokenizer {
namespace {

// Llama 2's is 0.5 MB, Gemma's 4 MB.
constexpr size_t kMaxModelBytes = 64u << 20;

class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  bool done() const { return pos_ >= bytes_.size(); }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) fail("ends inside a number");
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return value;
    }
    fail("holds a number longer than 10 bytes");
  }

  std::string_view bytes(size_t n) {
    if (n > bytes_.size() - pos_) fail("ends inside a field");
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  // The next field's number and wire type.
  std::pair<uint64_t, int> key() {
    const uint64_t k = varint();
    return {k >> 3, int(k & 7)};
  }

  std::string_view length_delimited() { return bytes(varint()); }

  void skip(int wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        return;
      case 1:
        bytes(8);
        return;
      case 2:
        length_delimited();
        return;
      case 5:
        bytes(4);
        return;
      default:
        fail("has a field of wire type " + std::to_string(wire_type));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::Format, path_ + ": not a SentencePiece model: the protobuf " + what +
                                       " at byte " + std::to_string(pos_) +
                                       " (copy the file again)");
  }

 private:
  std::string_view bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

SentencePiecePiece read_piece(std::string_view bytes, const std::string& path) {
  WireReader in(bytes, path);
  SentencePiecePiece piece;
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (field == 1 && wire == 2) {
      piece.piece = std::string(in.length_delimited());
    } else if (field == 2 && wire == 5) {
      std::memcpy(&piece.score, in.bytes(4).data(), 4);  // little-endian, as x86 and ARM
    } else if (field == 3 && wire == 0) {
      piece.type = static_cast<PieceType>(in.varint());
    } else {
      in.skip(wire);
    }
  }
  return piece;
}

void read_trainer_spec(std::string_view bytes, const std::string& path, SentencePieceSpec& spec) {
  WireReader in(bytes, path);
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (wire != 0) {
      in.skip(wire);
    } else if (field == 3) {
      spec.model_type = static_cast<SentencePieceSpec::ModelType>(in.varint());
    } else if (field == 24) {
      spec.treat_whitespace_as_suffix = in.varint() != 0;
    } else {
      in.skip(wire);
    }
  }
}

void read_normalizer_spec(std::string_view bytes, const std::string& path,
                          SentencePieceSpec& spec) {
  WireReader in(bytes, path);
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (field == 2 && wire == 2) {
      const std::string_view charsmap = in.length_delimited();
      spec.has_charsmap = !charsmap.empty();
      spec.spaces_read_alone = spaces_read_alone(charsmap);
    } else if (wire != 0) {
      in.skip(wire);
    } else if (field == 3) {
      spec.add_dummy_prefix = in.varint() != 0;
    } else if (field == 4) {
      spec.remove_extra_whitespaces = in.varint() != 0;
    } else if (field == 5) {
      spec.escape_whitespaces = in.varint() != 0;
    } else {
      in.skip(wire);
    }
  }
}

}  // namespace

SentencePieceModelFile parse_sentencepiece_model(std::string_view model_proto,
                                                 const std::string& origin) {
  WireReader in(model_proto, origin);
  SentencePieceModelFile model;
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (field == 1 && wire == 2) {
      model.pieces.push_back(read_piece(in.length_delimited(), origin));
    } else if (field == 2 && wire == 2) {
      read_trainer_spec(in.length_delimited(), origin, model.spec);
    } else if (field == 3 && wire == 2) {
      read_normalizer_spec(in.length_delimited(), origin, model.spec);
    } else {
      in.skip(wire);
    }
  }
  if (model.pieces.empty()) in.fail("holds no pieces");
  return model;
}

SentencePieceModelFile read_sentencepiece_model(const std::string& path) {
  return parse_sentencepiece_model(read_bounded_file(path, kMaxModelBytes), path);
}

SentencePieceSpec read_sentencepiece_spec(std::string_view model_proto) {
  try {
    return parse_sentencepiece_model(model_proto, "the loaded SentencePiece model").spec;
  } catch (const Error&) {
    return {};
  }
}

}  // namespace dsx::tokenizer
