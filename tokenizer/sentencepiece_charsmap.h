// Which white space a SentencePiece normalizer's precompiled charsmap reads alone, as one " ".
// The charsmap is a darts-clone double-array trie of the UTF-8 sequences it rewrites (then the
// rewrites); the normalizer replaces the longest key at each position. A character that is a key
// of its own mapped to " " (or, for ' ', no key at all), begins no longer key and sits inside no
// other key is always read alone, so text cut before it normalizes the same piece by piece as
// whole (sentencepiece_unigram_words.h relies on it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

// Of " ", "\t", "\n", "\r", U+00A0 and U+3000, those that `precompiled`
// (NormalizerSpec.precompiled_charsmap) reads alone as " ", in that order: only " " when there is
// no charsmap (the others are then kept as they are); none when the bytes are not a trie this
// reader can walk (the safe answer).
std::vector<std::string> spaces_read_alone(std::string_view precompiled);

// Whether a key of `precompiled` may rewrite a ' ' together with its neighbours (the safe answer
// for bytes that are not a trie).
bool charsmap_rewrites_spaces(std::string_view precompiled);

}  // namespace dsx::tokenizer
