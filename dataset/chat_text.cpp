// Which bytes of a rendered conversation are trained on (see chat_text.h).
#include "dataset/chat_text.h"

#include <algorithm>
#include <utility>

#include "dsx/error.h"

namespace dsx::dataset {

namespace {

using Span = std::pair<size_t, size_t>;

std::string render_first(const tokenizer::ChatTemplate& chat, const Conversation& c, size_t count,
                         bool add_generation_prompt) {
  jinja::List first(c.messages.begin(), c.messages.begin() + static_cast<std::ptrdiff_t>(count));
  return chat.render(first, add_generation_prompt, c.tools).text;
}

[[noreturn]] void not_a_prefix(const tokenizer::ChatTemplate& chat, size_t count) {
  throw Error(ErrorKind::Format,
              "chat template " + chat.origin() + " does not render the first " + std::to_string(count) +
                  " messages as the beginning of the whole conversation (it rewrites earlier turns), so "
                  "which text is the assistant's is unknown; mark the assistant's part with "
                  "{% generation %}...{% endgeneration %} in the template");
}

// The prefix rule of chat_text.h over the whole rendered text.
std::vector<Span> target_spans_by_prefix(const tokenizer::ChatTemplate& chat, const Conversation& c,
                                         const std::string& whole) {
  std::vector<Span> spans;
  const size_t n = c.messages.size();
  for (size_t i = 0; i < n; ++i) {
    if (!c.target[i]) continue;
    size_t j = i;
    while (j + 1 < n && c.target[j + 1]) ++j;
    const std::string before = render_first(chat, c, i, true);
    const std::string through = j + 1 == n ? whole : render_first(chat, c, j + 1, false);
    if (!whole.starts_with(through)) not_a_prefix(chat, j + 1);
    if (!through.starts_with(before)) not_a_prefix(chat, i);
    if (before.size() < through.size()) spans.emplace_back(before.size(), through.size());
    i = j;
  }
  return spans;
}

std::vector<TextPiece> cut(const std::string& text, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<TextPiece> pieces;
  size_t at = 0;
  auto add = [&](size_t end, bool target) {
    if (end <= at) return;
    if (!pieces.empty() && pieces.back().target == target)
      pieces.back().text.append(text, at, end - at);
    else
      pieces.push_back({text.substr(at, end - at), target});
    at = end;
  };
  for (const auto& [begin, end] : spans) {
    add(std::max(begin, at), false);
    add(std::min(end, text.size()), true);
  }
  add(text.size(), false);
  return pieces;
}

}  // namespace

std::vector<TextPiece> render_conversation(const tokenizer::ChatTemplate& chat,
                                           const Conversation& conversation) {
  jinja::Rendered whole = chat.render(conversation.messages, false, conversation.tools);
  if (conversation.generation_blocks_win && chat.marks_generation())
    return cut(whole.text, std::move(whole.generation));
  return cut(whole.text, target_spans_by_prefix(chat, conversation, whole.text));
}

}  // namespace dsx::dataset
