// Protobuf's wire format, as much as ModelProto needs: each field is a varint key (number << 3 |
// wire type) and then a varint (type 0), 8 bytes (1), a length and that many bytes (2), or 4
// bytes (5). ModelProto: pieces = 1, trainer_spec = 2. SentencePiece: piece = 1, score = 2
// (float), type = 3. TrainerSpec: model_type = 3 (UNIGRAM 1, BPE 2, WORD 3, CHAR 4; unset means
// UNIGRAM).
#include "tokenizer/sentencepiece_model_file.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "dsx/error.h"
#include "dsx/json_input.h"

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

bool trainer_spec_is_bpe(std::string_view bytes, const std::string& path) {
  WireReader in(bytes, path);
  uint64_t model_type = 1;
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (field == 3 && wire == 0)
      model_type = in.varint();
    else
      in.skip(wire);
  }
  return model_type == 2;
}

}  // namespace

SentencePieceModelFile read_sentencepiece_model(const std::string& path) {
  const std::string bytes = read_bounded_file(path, kMaxModelBytes);
  WireReader in(bytes, path);
  SentencePieceModelFile model;
  while (!in.done()) {
    auto [field, wire] = in.key();
    if (field == 1 && wire == 2) {
      model.pieces.push_back(read_piece(in.length_delimited(), path));
    } else if (field == 2 && wire == 2) {
      model.is_bpe = trainer_spec_is_bpe(in.length_delimited(), path);
    } else {
      in.skip(wire);
    }
  }
  if (model.pieces.empty()) in.fail("holds no pieces");
  return model;
}

}  // namespace dsx::tokenizer
