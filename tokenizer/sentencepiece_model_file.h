// The parts of a SentencePiece tokenizer.model (a protobuf ModelProto) that transformers reads to
// build its own tokenizer from it: the pieces with their scores and types, and the model type.
// A small reader of protobuf's wire format, because Debian's libsentencepiece ships no
// sentencepiece_model.pb.h to read them through.
#pragma once

#include <string>
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

struct SentencePieceModelFile {
  std::vector<SentencePiecePiece> pieces;  // index = id
  bool is_bpe = false;                     // TrainerSpec.model_type BPE (else Unigram, Word, Char)
};

// Throws dsx::Error (Io) when the file cannot be read, (Format) when it is not a ModelProto.
SentencePieceModelFile read_sentencepiece_model(const std::string& path);

}  // namespace dsx::tokenizer
