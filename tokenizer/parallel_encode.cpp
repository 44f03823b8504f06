// Work is handed out through one atomic counter: each thread of the shared WorkerPool takes the
// next unencoded item, so uneven documents balance themselves and no queue is needed. Every item's
// ids go to their own slot; the result is the concatenation in order.
#include "tokenizer/parallel_encode.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "tokenizer/worker_pool.h"

namespace dsx::tokenizer {
namespace {

unsigned thread_count(unsigned threads, size_t items) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(items, 1)));
}

// Runs job(i) for i in [0, count) on `threads` threads; the first exception is rethrown here.
void for_each_index(size_t count, unsigned threads, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::function<void()> worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = count;
      }
    }
  };
  WorkerPool::shared().run(threads, worker);
  if (error) std::rethrow_exception(error);
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_printable_non_space(char c) { return c > ' ' && c < 0x7F; }

}  // namespace

std::vector<std::vector<TokenId>> encode_documents(const Tokenizer& tokenizer,
                                                   std::span<const std::string_view> documents,
                                                   const EncodeOptions& options, unsigned threads) {
  std::vector<std::vector<TokenId>> out(documents.size());
  for_each_index(documents.size(), thread_count(threads, documents.size()),
                 [&](size_t i) { tokenizer.encode_into(documents[i], options, out[i]); });
  return out;
}

namespace {

// Consecutive documents [first, last) encoded into one buffer; ends[i] is where document first + i
// ends in ids.
struct DocumentRun {
  size_t first = 0, last = 0;
  std::vector<TokenId> ids;
  std::vector<size_t> ends;
};

// Cuts the documents into runs of about `target` bytes; the runs' buffers keep their capacity.
void plan_runs(std::span<const std::string_view> documents, size_t target,
               std::vector<DocumentRun>& runs, size_t& count) {
  count = 0;
  size_t bytes = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    if (bytes == 0) {
      if (runs.size() == count) runs.emplace_back();
      runs[count].first = d;
    }
    bytes += documents[d].size() + 1;
    if (bytes >= target || d + 1 == documents.size()) {
      runs[count++].last = d + 1;
      bytes = 0;
    }
  }
}

}  // namespace

void append_documents(const Tokenizer& tokenizer, std::span<const std::string_view> documents,
                      const EncodeOptions& options, unsigned threads,
                      std::span<const TokenId> before, std::span<const TokenId> after,
                      std::vector<TokenId>& out, std::vector<size_t>* starts) {
  constexpr size_t kRunBytes = 64 * 1024;
  thread_local std::vector<DocumentRun> callers_runs;  // reused call after call
  // A name for the caller's instance: inside the lambda, `callers_runs` would name each worker's.
  std::vector<DocumentRun>& runs = callers_runs;
  size_t count = 0;
  plan_runs(documents, kRunBytes, runs, count);
  for_each_index(count, thread_count(threads, count), [&](size_t r) {
    DocumentRun& run = runs[r];
    run.ids.clear(), run.ends.clear();
    for (size_t d = run.first; d < run.last; ++d) {
      run.ids.insert(run.ids.end(), before.begin(), before.end());
      tokenizer.encode_into(documents[d], options, run.ids);
      run.ids.insert(run.ids.end(), after.begin(), after.end());
      run.ends.push_back(run.ids.size());
    }
  });
  size_t total = out.size();
  for (size_t r = 0; r < count; ++r) total += runs[r].ids.size();
  out.reserve(total);
  for (size_t r = 0; r < count; ++r) {
    const DocumentRun& run = runs[r];
    const size_t base = out.size();
    if (starts) {
      starts->push_back(base);
      for (size_t i = 0; i + 1 < run.ends.size(); ++i) starts->push_back(base + run.ends[i]);
    }
    out.insert(out.end(), run.ids.begin(), run.ids.end());
  }
}

std::vector<size_t> line_start_cuts(std::string_view text, size_t target) {
  std::vector<size_t> cuts;
  size_t from = target;
  while (from < text.size()) {
    size_t nl = text.find('\n', from);
    while (nl != std::string_view::npos &&
           !(nl > 0 && nl + 1 < text.size() && is_printable_non_space(text[nl - 1]) &&
             is_ascii_letter(text[nl + 1]))) {
      nl = text.find('\n', nl + 1);
    }
    if (nl == std::string_view::npos) break;
    cuts.push_back(nl + 1);
    from = nl + 1 + target;
  }
  return cuts;
}

std::vector<TokenId> encode_large_text(const Tokenizer& tokenizer, std::string_view text,
                                       const EncodeOptions& options, unsigned threads) {
  threads = thread_count(threads, text.size());
  constexpr size_t kMinChunk = 64 * 1024;
  if (threads == 1 || !tokenizer.cuts_at_line_starts() || text.size() < 2 * kMinChunk) {
    return tokenizer.encode(text, options);
  }
  // Several chunks per thread, so a slow chunk does not hold the others up.
  size_t target = std::max(kMinChunk, text.size() / (size_t(threads) * 8));
  std::vector<size_t> starts{0};
  for (size_t cut : line_start_cuts(text, target)) starts.push_back(cut);
  starts.push_back(text.size());
  std::vector<std::string_view> chunks;
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    chunks.push_back(text.substr(starts[i], starts[i + 1] - starts[i]));
  }
  EncodeOptions inner = options;
  inner.add_special_tokens = false;
  auto pieces = encode_documents(tokenizer, chunks, inner, threads);
  SpecialTokenTemplate around;
  if (options.add_special_tokens) around = tokenizer.special_template();
  size_t total = around.prefix.size() + around.suffix.size();
  for (const auto& p : pieces) total += p.size();
  std::vector<TokenId> ids;
  ids.reserve(total);
  ids.insert(ids.end(), around.prefix.begin(), around.prefix.end());
  for (const auto& p : pieces) ids.insert(ids.end(), p.begin(), p.end());
  ids.insert(ids.end(), around.suffix.begin(), around.suffix.end());
  return ids;
}

}  // namespace dsx::tokenizer
