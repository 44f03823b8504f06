// Documents of a buffer and of a file read in chunks: lines (run_clm's one example a line),
// paragraphs and JSON lines, chunks cut only at document boundaries.
#include <gtest/gtest.h>

#include "dataset/document_reader.h"
#include "dataset/document_split.h"
#include "dsx/error.h"
#include "tests/dataset/dataset_test_util.h"
#include "tests/models/temp_dir.h"

using namespace dsx::dataset;

namespace {

std::vector<std::string> texts(const SplitResult& r) {
  return {r.documents.begin(), r.documents.end()};
}

std::vector<std::string> read_all(const std::string& path, DocumentSplit split, size_t chunk,
                                  std::vector<uint64_t>* lines = nullptr) {
  DocumentReader reader(path, split, chunk, 1 << 20);
  std::vector<std::string> docs;
  DocumentChunk c;
  while (reader.next(c)) {
    docs.insert(docs.end(), c.documents.begin(), c.documents.end());
    if (lines) lines->insert(lines->end(), c.lines.begin(), c.lines.end());
  }
  return docs;
}

}  // namespace

TEST(DocumentSplit, LinesKeepTheirNewlineAndSkipBlankOnes) {
  auto r = split_documents("a b\n\n  \nc\nd", DocumentSplit::Lines, 1, false);
  EXPECT_EQ(texts(r), (std::vector<std::string>{"a b\n", "c\n"}));
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(r.consumed, 10u);  // "d" has no newline yet: it waits for the next read
  EXPECT_EQ(r.next_line, 5u);
  r = split_documents("a b\n\n  \nc\nd", DocumentSplit::Lines, 1, true);
  EXPECT_EQ(texts(r), (std::vector<std::string>{"a b\n", "c\n", "d"}));
  EXPECT_EQ(r.consumed, 11u);
}

TEST(DocumentSplit, ParagraphsEndAtBlankLines) {
  const std::string text = "one\ntwo\n\nthree\n \nfour\nfive\n";
  auto r = split_documents(text, DocumentSplit::Paragraphs, 10, false);
  EXPECT_EQ(texts(r), (std::vector<std::string>{"one\ntwo\n", "three\n"}));
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{10, 13}));
  EXPECT_EQ(r.consumed, text.find("four"));  // the open paragraph waits for its blank line
  r = split_documents(text, DocumentSplit::Paragraphs, 10, true);
  EXPECT_EQ(texts(r), (std::vector<std::string>{"one\ntwo\n", "three\n", "four\nfive\n"}));
  EXPECT_EQ(r.consumed, text.size());
}

TEST(DocumentSplit, JsonlByExtension) {
  EXPECT_EQ(split_for_path("a/b.jsonl", DocumentSplit::Paragraphs), DocumentSplit::JsonLines);
  EXPECT_EQ(split_for_path("a/b.txt", DocumentSplit::Paragraphs), DocumentSplit::Paragraphs);
}

TEST(DocumentReader, SmallChunksGiveTheSameDocumentsAsOneRead) {
  dsx::test::TempDir dir;
  auto lines = dsx::test::corpus_lines(2000, 3);
  dsx::test::write_file(dir.file("c.txt"), dsx::test::joined(lines) + "tail without newline");
  for (auto split : {DocumentSplit::Lines, DocumentSplit::Paragraphs}) {
    std::vector<uint64_t> whole_lines, chunk_lines;
    auto whole = read_all(dir.file("c.txt"), split, 1 << 22, &whole_lines);
    auto chunked =
        read_all(dir.file("c.txt"), split, 100, &chunk_lines);  // far smaller than the file
    EXPECT_EQ(chunked, whole);
    EXPECT_EQ(chunk_lines, whole_lines);
    EXPECT_EQ(whole.back().substr(whole.back().size() - 7), "newline");
  }
  // A document longer than a chunk grows the buffer rather than being cut.
  dsx::test::write_file(dir.file("long.txt"), std::string(5000, 'x') + "\nshort\n");
  EXPECT_EQ(read_all(dir.file("long.txt"), DocumentSplit::Lines, 64),
            (std::vector<std::string>{std::string(5000, 'x') + "\n", "short\n"}));
}

TEST(DocumentReader, ErrorsNameTheFile) {
  dsx::test::TempDir dir;
  try {
    DocumentReader r(dir.file("missing.txt"), DocumentSplit::Lines, 64, 64);
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt': cannot open"), std::string::npos)
        << e.what();
  }
  dsx::test::write_file(dir.file("long.txt"), "ok\n" + std::string(5000, 'x') + "\n");
  try {
    DocumentReader r(dir.file("long.txt"), DocumentSplit::Lines, 64, 1024);
    DocumentChunk c;
    while (r.next(c)) {
    }
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("long.txt:2: a document longer than 1024 bytes"),
              std::string::npos)
        << e.what();
  }
}

// Text that is not UTF-8 is refused where it is read, naming the file, the line and the byte's
// offset in the file: the same whatever the chunk size (a tokenizer's own check could only give
// an offset inside whichever chunk or document it was handed).
TEST(DocumentReader, InvalidUtf8NamesFileLineAndFileOffset) {
  dsx::test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + " caf\xC3\xA9\n";
  const size_t offset = text.size() + 7;  // line 201
  text += "broken \xFF byte\nmore\n";
  dsx::test::write_file(dir.file("latin1.txt"), text);
  for (DocumentSplit split : {DocumentSplit::Lines, DocumentSplit::Paragraphs}) {
    for (size_t chunk : {16, 100, 4096, 1 << 20}) {
      try {
        read_all(dir.file("latin1.txt"), split, chunk);
        ADD_FAILURE() << "no error with chunk " << chunk;
      } catch (const dsx::Error& e) {
        EXPECT_NE(std::string(e.what()).find(dir.file("latin1.txt") + ":201: not valid UTF-8 at byte offset " +
                                              std::to_string(offset) + " (0xFF)"),
                  std::string::npos)
            << "chunk " << chunk << ": " << e.what();
      }
    }
  }
}
