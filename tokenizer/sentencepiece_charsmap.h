// Whether a SentencePiece normalizer's precompiled charsmap can rewrite a ' ' together with its
// neighbours. The charsmap is a darts-clone double-array trie of the UTF-8 sequences it rewrites
// (then the rewrites themselves); the normalizer replaces the longest key at each position. When
// no key holds a ' ', every ' ' of the text is read alone, so text cut before a ' ' is normalized
// the same piece by piece as whole (sentencepiece_unigram_words.h relies on it).
#pragma once

#include <string_view>

namespace dsx::tokenizer {

// True when some key of `precompiled` (NormalizerSpec.precompiled_charsmap) holds the byte ' ',
// or when the bytes are not a trie this reader can walk (the safe answer).
bool charsmap_rewrites_spaces(std::string_view precompiled);

}  // namespace dsx::tokenizer
