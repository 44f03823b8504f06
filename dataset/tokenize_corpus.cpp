// Text and JSONL to token shards, streamed (see tokenize_corpus.h).
#include "dataset/tokenize_corpus.h"

#include <fcntl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <regex>

#include "dataset/document_encoder.h"
#include "dataset/document_reader.h"
#include "dataset/jsonl.h"
#include "dataset/shard_writer.h"
#include "dsx/error.h"
#include "models/data/token_files.h"
#include "models/io/files.h"

namespace dsx::dataset {

namespace fs = std::filesystem;

namespace {

// --out exists (made if need be), takes a file, and holds no shards a run would mix with ours.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error(ErrorKind::Io, "--out '" + dir + "': cannot create it (" + ec.message() +
                                   "); choose a writable directory");
  }
  const std::string probe = dir + "/.dsx-tokenize-probe-" + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(ErrorKind::Io, "--out '" + dir + "': cannot write there (" + std::strerror(errno) +
                                   "); choose a writable directory");
  }
  ::close(fd), ::unlink(probe.c_str());
  static const std::regex shard_name("(train|val)_[0-9]{6}\\.bin");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, shard_name)) {
      throw Error(ErrorKind::Config,
                  "--out '" + dir + "' already holds token shards (" + name +
                      "); remove them or choose another directory, so runs do not mix");
    }
  }
}

uint64_t input_bytes(const std::vector<std::string>& files) {
  if (files.empty()) {
    throw Error(ErrorKind::Usage, "no input files; give text or .jsonl files to tokenize");
  }
  uint64_t total = 0;
  for (const auto& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) {
      throw Error(ErrorKind::Io, "input '" + f + "': " + std::strerror(errno) + "; check the path");
    }
    if (!S_ISREG(st.st_mode)) {
      throw Error(ErrorKind::Io, "input '" + f + "': not a regular file");
    }
    total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

// Every 1/f-th document goes to validation, spread evenly and the same on every run.
struct ValChooser {
  double fraction, credit = 0;
  bool next() {
    credit += fraction;
    if (credit < 1) {
      return false;
    }
    credit -= 1;
    return true;
  }
};

void write_info(const std::string& path, const tokenizer::Tokenizer& tok, const TokenizeOptions& o,
                const TokenizeSummary& s) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto str = [&](const std::string& v) {
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  w.Key("tokenizer"), str(tok.describe());
  w.Key("vocab_size"), w.Int(tok.vocab_size());
  w.Key("token_bytes"), w.Uint64(s.token_bytes);
  w.Key("eos_id"), w.Int(*tok.eos_id());
  w.Key("files");
  w.StartArray();
  for (const auto& f : o.files) {
    str(f);
  }
  w.EndArray();
  w.Key("documents"), w.Uint64(s.totals.documents);
  w.Key("tokens"), w.Uint64(s.totals.tokens);
  w.Key("val_documents"), w.Uint64(s.val_documents);
  w.Key("val_tokens"), w.Uint64(s.val_tokens);
  w.Key("shard_tokens"), w.Uint64(o.shard_tokens);
  w.Key("train_shards"), w.Uint64(s.train_shards.size());
  w.Key("val_shards"), w.Uint64(s.val_shards.size());
  w.EndObject();
  models::AtomicWriter out(path);
  out.write(buffer.GetString(), buffer.GetSize());
  out.write("\n", 1);
  out.commit();
}

}  // namespace

std::vector<std::string_view> document_texts(const std::vector<std::string_view>& documents,
                                             const std::vector<uint64_t>& lines,
                                             DocumentSplit split, const std::string& path,
                                             std::vector<std::string>& storage) {
  if (split != DocumentSplit::JsonLines) {
    return documents;
  }
  storage.clear();
  storage.reserve(documents.size());  // no reallocation: the views below point into these strings
  for (size_t i = 0; i < documents.size(); ++i) {
    JsonlLine at{path, lines[i]};
    auto object = parse_jsonl_object(documents[i], at);
    auto text = string_member(object, "text", at);
    if (!text) {
      throw Error(ErrorKind::Format,
                  at.where() + ": missing field 'text'; each line must be {\"text\": \"...\"}");
    }
    storage.push_back(std::move(*text));
  }
  return {storage.begin(), storage.end()};
}

TokenizeSummary tokenize_corpus(const tokenizer::Tokenizer& tok, const TokenizeOptions& o,
                                const std::function<void(const TokenizeProgress&)>& on_progress) {
  if (o.val_fraction < 0 || o.val_fraction >= 1) {
    throw Error(ErrorKind::Usage,
                "--val_fraction " + std::to_string(o.val_fraction) + ": give a share in [0, 1)");
  }
  const auto start = std::chrono::steady_clock::now();
  TokenizeSummary s;
  s.totals.bytes_total = input_bytes(o.files);
  prepare_out_dir(o.out_dir);
  s.files = o.files.size();
  s.token_bytes = models::shard_token_bytes(tok.vocab_size());
  DocumentEncoder encoder(tok, o.threads);
  ShardWriter train(o.out_dir, "train", o.shard_tokens, s.token_bytes);
  ShardWriter val(o.out_dir, "val", o.shard_tokens, s.token_bytes);
  ValChooser chooser{o.val_fraction};
  DocumentChunk chunk;
  std::vector<std::string> storage;
  std::vector<int32_t> ids, train_ids, val_ids;
  std::vector<size_t> starts;
  for (const auto& path : o.files) {
    const DocumentSplit split = split_for_path(path, o.text_split);
    DocumentReader reader(path, split, o.chunk_bytes, o.max_document_bytes);
    while (reader.next(chunk)) {
      auto texts = document_texts(chunk.documents, chunk.lines, split, path, storage);
      ids.clear(), starts.clear(), train_ids.clear(), val_ids.clear();
      encoder.append_documents(texts, ids, &starts);
      if (o.val_fraction == 0) {
        train.append(ids);
      } else {  // each document to one of the two
        starts.push_back(ids.size());
        for (size_t d = 0; d + 1 < starts.size(); ++d) {
          const bool to_val = chooser.next();
          auto& dest = to_val ? val_ids : train_ids;
          dest.insert(dest.end(), ids.begin() + starts[d], ids.begin() + starts[d + 1]);
          s.val_documents += to_val;
        }
        train.append(train_ids), val.append(val_ids);
      }
      s.totals.bytes_read += chunk.bytes;
      s.totals.documents += texts.size();
      s.totals.tokens += ids.size();
      s.totals.shards = train.files().size() + val.files().size();
      s.totals.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (on_progress) {
        on_progress(s.totals);
      }
    }
  }
  if (s.totals.documents == 0) {
    throw Error(ErrorKind::Format, "no documents in the input (" + std::to_string(o.files.size()) +
                                       " file(s), all empty or blank); give files with text");
  }
  train.finish(), val.finish();
  s.train_shards = train.files(), s.val_shards = val.files();
  s.val_tokens = val.tokens();
  s.totals.shards = s.train_shards.size() + s.val_shards.size();
  write_info(o.out_dir + "/tokenize.json", tok, o, s);
  s.totals.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace dsx::dataset
