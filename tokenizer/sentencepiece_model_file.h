// The parts of a SentencePiece tokenizer.model (a protobuf ModelProto) that dsx reads itself: the
// pieces with their scores and types (transformers builds its own tokenizer from them), and the
// few trainer and normalizer settings that decide whether text can be encoded word by word
// (sentencepiece_words.h). A small reader of protobuf's wire format, because Debian's
// libsentencepiece ships no sentencepiece_model.pb.h to read them through.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

// sentencepiece_model.proto's SentencePiece.Type.
enum class PieceType {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6
};

struct SentencePiecePiece {
  std::string piece;
  float score = 0;
  PieceType type = PieceType::Normal;
};

// The settings; where a field is absent, the proto's default.
struct SentencePieceSpec {
  enum class ModelType { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };
  ModelType model_type = ModelType::Unigram;  // TrainerSpec.model_type (3)
  bool treat_whitespace_as_suffix = false;    // TrainerSpec (24)
  bool has_charsmap = false;                  // NormalizerSpec.precompiled_charsmap (2) not empty
  bool add_dummy_prefix = true;               // NormalizerSpec (3)
  bool remove_extra_whitespaces = true;       // NormalizerSpec (4)
  bool escape_whitespaces = true;             // NormalizerSpec (5)
  // The white space the normalizer always reads alone, as " " (sentencepiece_charsmap.h).
  std::vector<std::string> spaces_read_alone{" "};
};

struct SentencePieceModelFile {
  std::vector<SentencePiecePiece> pieces;  // index = id
  SentencePieceSpec spec;
};

// Throws dsx::Error (Io) when the file cannot be read, (Format) when it is not a ModelProto.
SentencePieceModelFile read_sentencepiece_model(const std::string& path);

// The same from the bytes of a ModelProto; `origin` names them in errors.
SentencePieceModelFile parse_sentencepiece_model(std::string_view model_proto,
                                                 const std::string& origin);

// The settings of a ModelProto the library has already loaded; the defaults if the bytes are not
// a well-formed message (which, the library having accepted them, does not happen).
SentencePieceSpec read_sentencepiece_spec(std::string_view model_proto);

}  // namespace dsx::tokenizer
