// NFC through utf8proc, and the fast path that skips text NFC would not change: the texts that
// need composing, reordering or a singleton mapping still get it.
#include <gtest/gtest.h>

#include "tokenizer/normalizer.h"

namespace dsx::tokenizer {
namespace {

std::string nfc(const std::string& text) {
  Normalizer n;
  n.add(UnicodeForm::NFC);
  std::string buffer;
  return std::string(n.apply(text, buffer));
}

TEST(Normalizer, NfcComposesReordersAndMapsSingletons) {
  EXPECT_EQ(nfc("cafe\u0301"), "caf\u00e9");         // e + acute -> é
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01");    // Hangul jamo L V T -> 각
  EXPECT_EQ(nfc("\u212B"), "\u00C5");                // Angstrom sign -> Å
  EXPECT_EQ(nfc("a\u0323\u0307"), "\u1EA1\u0307");   // dot below, then dot above
  EXPECT_EQ(nfc("q\u0307\u0323"), "q\u0323\u0307");  // marks reordered by class
  // U+0958 is excluded from composition: NFC keeps the pair, and even decomposes U+0958.
  EXPECT_EQ(nfc("\u0915\u093C"), "\u0915\u093C");
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093C");
  EXPECT_EQ(nfc("\u0B47\u0B3E"), "\u0B4B");  // Oriya vowel sign pair
}

TEST(Normalizer, TextAlreadyInNfcIsReturnedAsItIs) {
  for (std::string text : {"plain ascii", "Grüße, мир, 你好, 😀, ᚠᛇᚻ", "\uAC01 \u00e9"}) {
    EXPECT_EQ(nfc(text), text);
  }
}

TEST(Normalizer, OtherFormsDecomposeAndFoldCompatibility) {
  Normalizer nfd;
  nfd.add(UnicodeForm::NFD);
  Normalizer nfkc;
  nfkc.add(UnicodeForm::NFKC);
  std::string buffer;
  EXPECT_EQ(std::string(nfd.apply("caf\u00e9", buffer)), "cafe\u0301");
  EXPECT_EQ(std::string(nfkc.apply("\uFB01 \u2460", buffer)), "fi 1");  // ligature, circled 1
}

}  // namespace
}  // namespace dsx::tokenizer
