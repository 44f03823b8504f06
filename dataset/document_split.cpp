// Document boundaries in a buffer (see document_split.h).
#include "dataset/document_split.h"

namespace dsx::dataset {

namespace {

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

}  // namespace

SplitResult split_documents(std::string_view text, DocumentSplit split, uint64_t first_line,
                            bool at_end) {
  SplitResult r;
  r.next_line = first_line;
  uint64_t line = first_line;
  size_t para_start = std::string_view::npos;
  uint64_t para_line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos && !at_end) {
      break;  // an incomplete line waits for more
    }
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view l = text.substr(pos, end - pos);
    if (split != DocumentSplit::Paragraphs) {
      if (!blank(l)) {
        r.documents.push_back(l), r.lines.push_back(line);
      }
      r.consumed = end, r.next_line = line + 1;
    } else if (blank(l)) {
      if (para_start != std::string_view::npos) {
        r.documents.push_back(text.substr(para_start, pos - para_start)),
            r.lines.push_back(para_line);
        para_start = std::string_view::npos;
      }
      r.consumed = end, r.next_line = line + 1;
    } else if (para_start == std::string_view::npos) {
      para_start = pos, para_line = line;
    }
    pos = end, ++line;
  }
  if (para_start != std::string_view::npos && at_end) {
    r.documents.push_back(text.substr(para_start)), r.lines.push_back(para_line);
    r.consumed = text.size(), r.next_line = line;
  }
  return r;
}

DocumentSplit split_for_path(std::string_view path, DocumentSplit fallback) {
  return path.ends_with(".jsonl") ? DocumentSplit::JsonLines : fallback;
}

}  // namespace dsx::dataset
