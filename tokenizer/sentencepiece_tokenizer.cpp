#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "dsx/error.h"
#include "tokenizer/sentencepiece_model_file.h"
#include "tokenizer/sentencepiece_unigram_words.h"
#include "tokenizer/sentencepiece_words.h"
#include "tokenizer/utf8.h"
#include "tokenizer/word_cache.h"

namespace dsx::tokenizer {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path,
                                               const SentencePieceRules& rules)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()),
      source_(model_path),
      cache_owner_(WordCache::new_owner()) {
  if (!std::filesystem::exists(model_path)) {
    throw Error(ErrorKind::Io, model_path + ": no such file");
  }
  auto status = processor_->Load(model_path);
  if (!status.ok()) {
    throw Error(ErrorKind::Format, model_path +
                                       ": not a SentencePiece model that the "
                                       "sentencepiece library can load: " +
                                       status.ToString() + " (copy the file again)");
  }
  bos_ = rules.bos_token ? piece_id(*rules.bos_token, "bos_token")
                         : (processor_->bos_id() >= 0 ? std::optional<TokenId>(processor_->bos_id())
                                                      : std::nullopt);
  eos_ = rules.eos_token ? piece_id(*rules.eos_token, "eos_token")
                         : (processor_->eos_id() >= 0 ? std::optional<TokenId>(processor_->eos_id())
                                                      : std::nullopt);
  add_bos_ = rules.add_bos && bos_;
  add_eos_ = rules.add_eos && eos_;
  if (rules.add_eos && !eos_) {
    throw Error(ErrorKind::Format, model_path +
                                       ": add_eos_token is true but the model has no EOS "
                                       "piece (set eos_token in tokenizer_config.json)");
  }
  std::vector<std::string> pieces(size_t(processor_->GetPieceSize()));
  for (size_t id = 0; id < pieces.size(); ++id) pieces[id] = processor_->IdToPiece(int(id));
  const SentencePieceModelFile model =
      parse_sentencepiece_model(processor_->serialized_model_proto(), model_path);
  by_words_ = encodes_word_by_word(model.spec, pieces);
  by_unigram_words_ = unigram_encodes_word_by_word(model);
  word_breaks_ = model.spec.spaces_read_alone;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::optional<TokenId> SentencePieceTokenizer::piece_id(const std::string& piece,
                                                        const char* field) const {
  int id = processor_->PieceToId(piece);
  if (id == processor_->unk_id() && piece != processor_->IdToPiece(id)) {
    throw Error(ErrorKind::Format, source_ + ": tokenizer_config.json's " + field + " \"" + piece +
                                       "\" is not a piece of the model");
  }
  return id;
}

void SentencePieceTokenizer::encode_into(std::string_view text, const EncodeOptions& options,
                                         std::vector<TokenId>& out) const {
  utf8::require_valid(text, "the text to encode");
  if (options.add_special_tokens && add_bos_) out.push_back(*bos_);
  if (by_words_) {
    encode_by_words(text, out);
  } else if (by_unigram_words_) {
    encode_by_unigram_words(text, out);
  } else {
    encode_by_library(text, out);
  }
  if (options.add_special_tokens && add_eos_) out.push_back(*eos_);
}

void SentencePieceTokenizer::encode_by_library(std::string_view text,
                                               std::vector<TokenId>& out) const {
  thread_local std::vector<int> ids;
  auto status = processor_->Encode(text, &ids);
  if (!status.ok()) {
    throw Error(ErrorKind::Internal,
                source_ + ": sentencepiece failed to encode: " + status.ToString());
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::encode_by_words(std::string_view text,
                                             std::vector<TokenId>& out) const {
  thread_local std::vector<std::string_view> words;
  words.clear();
  sentencepiece_words(text, words);
  WordCache& cache = WordCache::for_thread(cache_owner_);
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string_view input = library_input(words[i], i);
    if (const auto* ids = cache.find(input)) {
      out.insert(out.end(), ids->begin(), ids->end());
      continue;
    }
    const size_t start = out.size();
    encode_by_library(input, out);
    cache.insert(input, out.data() + start, out.size() - start);
  }
}

void SentencePieceTokenizer::encode_by_unigram_words(std::string_view text,
                                                     std::vector<TokenId>& out) const {
  thread_local std::vector<std::string_view> words;
  words.clear();
  unigram_words(text, word_breaks_, words);
  auto& cache = WordCacheOf<UnigramWord>::for_thread(cache_owner_);
  const size_t start = out.size();
  auto to_library = [&] {
    out.resize(start);
    encode_by_library(text, out);
  };
  double prefix_score = 0;  // |S|: the best path's score of the text so far
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string_view input = words[i];
    const UnigramWord* word = cache.find(input);
    UnigramWord fresh;
    if (!word && input.size() > WordCacheOf<UnigramWord>::kMaxWordBytes) {
      return to_library();  // a long word, seldom seen twice: its 2-best costs more than that
    }
    if (!word) {
      fresh = encode_unigram_word(*processor_, input, source_);
      cache.insert(input, fresh);
      word = &fresh;
    }
    if (!word->fits_after(prefix_score, i + 1 == words.size())) {
      return to_library();  // a near tie or a join the words cannot settle: the library decides
    }
    out.insert(out.end(), word->ids.begin(), word->ids.end());
    prefix_score += word->best_score;
  }
}

std::string SentencePieceTokenizer::decode(std::span<const TokenId> ids,
                                           const DecodeOptions& options) const {
  std::vector<int> kept;
  const int size = processor_->GetPieceSize();
  for (TokenId id : ids) {
    if (id < 0 || id >= size) continue;
    if (options.skip_special_tokens && processor_->IsControl(id)) continue;
    kept.push_back(id);
  }
  std::string text;
  auto status = processor_->Decode(kept, &text);
  if (!status.ok()) {
    throw Error(ErrorKind::Internal,
                source_ + ": sentencepiece failed to decode: " + status.ToString());
  }
  return text;
}

SpecialTokenTemplate SentencePieceTokenizer::special_template() const {
  SpecialTokenTemplate t;
  if (add_bos_) t.prefix.push_back(*bos_);
  if (add_eos_) t.suffix.push_back(*eos_);
  return t;
}

TokenId SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::optional<TokenId> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  int id = processor_->PieceToId(token);
  if (id == processor_->unk_id() && token != processor_->IdToPiece(id)) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::describe() const {
  return "SentencePiece from " + source_ + " (vocab " + std::to_string(vocab_size()) +
         (by_words_ || by_unigram_words_ ? ", word by word" : "") + ")";
}

}  // namespace dsx::tokenizer
