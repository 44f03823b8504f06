// The few settings of a SentencePiece model that decide whether its text can be encoded word by
// word (sentencepiece_words.h), read from the serialized ModelProto (sentencepiece_model.proto)
// with a minimal protobuf wire-format reader: the library's headers do not expose the proto's
// fields, and these five are all dsx needs. Defaults are the proto's.
#pragma once

#include <string_view>

namespace dsx::tokenizer {

struct SentencePieceSpec {
  enum class ModelType { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };
  ModelType model_type = ModelType::Unigram;  // TrainerSpec.model_type (3)
  bool treat_whitespace_as_suffix = false;    // TrainerSpec (24)
  bool has_charsmap = false;                  // NormalizerSpec.precompiled_charsmap (2) not empty
  bool add_dummy_prefix = true;               // NormalizerSpec (3)
  bool remove_extra_whitespaces = true;       // NormalizerSpec (4)
  bool escape_whitespaces = true;             // NormalizerSpec (5)
};

// The settings of a serialized ModelProto; the defaults where a field is absent or the bytes are
// not a well-formed message (the library has loaded the same bytes, so that does not happen).
SentencePieceSpec read_sentencepiece_spec(std::string_view model_proto);

}  // namespace dsx::tokenizer
