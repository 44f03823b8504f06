"""Trains the tokenizer fixtures of tests/tokenizer/data/ and writes the ids the Python libraries
give for them (cases.json), so the C++ tests compare against `tokenizers` and `sentencepiece`
without running Python. Run once by hand in a venv with tokenizers, sentencepiece, transformers
and protobuf:

    python3 tests/tokenizer/compat/make_fixtures.py tests/tokenizer/data

Each fixture folder looks like a Hugging Face model folder (tokenizer.json or tokenizer.model, and
tokenizer_config.json). The fixtures are small (vocabularies of 300-1000) but use the real
components: GPT-2's ByteLevel regex, Llama 3's Split regex with ignore_merges and a BOS template,
Qwen2's NFC normalizer and single-digit regex, a SentencePiece BPE model with byte fallback (with
transformers' ids for its folder under three sets of LlamaTokenizer switches), and that model as
transformers converts it to tokenizer.json (Metaspace, and the older Prepend/Replace spelling). cases.json of the tokenizer.json fixtures holds the decoded text too."""

import json
import os
import sys

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multilingual_text import make_text  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [make_text(seed, 2000) for seed in range(100)]
SAMPLE = make_text(7, 6000)


def byte_level_trainer(vocab_size, specials):
    return trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def gpt2_style():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(CORPUS, byte_level_trainer(800, ["<|endoftext|>"]))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True),
                            AddedToken("[WORD]", single_word=True, special=True)])
    tok.add_tokens([AddedToken(" dsx engine", normalized=True, special=False)])
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
              "unk_token": "<|endoftext|>", "add_prefix_space": False,
              "tokenizer_class": "GPT2Tokenizer"}
    return tok, config


def prefix_space_style():
    """The GPT-2 fixture's vocabulary behind other pre-tokenizer options: a Split whose digits
    merge with what follows, then ByteLevel with add_prefix_space (a space before every piece
    that lacks one) and GPT-2's regex."""
    tok, config = gpt2_style()
    # Not GPT2Tokenizer: transformers would rebuild that class's own pre-tokenizer.
    config.update(add_prefix_space=True, tokenizer_class="PreTrainedTokenizerFast")
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="merged_with_next"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    return tok, config


def llama3_style():
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, byte_level_trainer(1000, []))
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    tok.add_special_tokens([AddedToken("<|rstrip|>", rstrip=True, special=True)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
              "tokenizer_class": "PreTrainedTokenizerFast"}
    return tok, config


def qwen2_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(CORPUS, byte_level_trainer(900, ["<|endoftext|>"]))
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True),
                            AddedToken("<|im_end|>", special=True)])
    config = {"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
              "add_prefix_space": False, "tokenizer_class": "Qwen2Tokenizer"}
    return tok, config


def sentencepiece_json_style(folder, legacy):
    """The spm fixture as transformers converts it to tokenizer.json, which is all save_pretrained
    writes for Llama 2 and Mistral tokenizers in transformers 5: BPE with byte_fallback, a Metaspace
    pre-tokenizer and decoder. `legacy`: the older spelling of the same rules (Prepend and Replace
    normalizers, no pre-tokenizer, a Replace/ByteFallback/Fuse/Strip decoder)."""
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(folder, "spm")).backend_tokenizer
    if legacy:
        data = json.loads(tok.to_str())
        data["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        data["pre_tokenizer"] = None
        data["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
        tok = Tokenizer.from_str(json.dumps(data))
    with open(os.path.join(folder, "spm", "tokenizer_config.json")) as f:
        config = json.load(f)
    return tok, config


def short_cases(specials):
    texts = ["", " ", "Hello world! It's 12345  x\n\ny", "  leading and trailing  ",
             "cafe\u0301 café", "\r\n\r\n", "a" * 300, "1234567890", "👨‍👩‍👧‍👦👍🏽",
             "It'S WE'LL i'M", "\u00a0\u3000\t x"]
    texts += [f"before{s}after" for s in specials]
    texts += [f"two {specials[0]}  {specials[-1]}   tokens" for _ in [0]]
    return texts


def write_json_fixture(folder, name, tok, config, specials):
    os.makedirs(os.path.join(folder, name), exist_ok=True)
    tok.save(os.path.join(folder, name, "tokenizer.json"))
    with open(os.path.join(folder, name, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    cases = []
    for text in [SAMPLE] + short_cases(specials):
        for add_special in (True, False):
            ids = tok.encode(text, add_special_tokens=add_special).ids
            cases.append({"text": text, "add_special_tokens": add_special, "split_special_tokens": False,
                          "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    tok.encode_special_tokens = True
    for text in short_cases(specials)[-len(specials) - 1:]:
        cases.append({"text": text, "add_special_tokens": False, "split_special_tokens": True,
                      "ids": tok.encode(text, add_special_tokens=False).ids})
    with open(os.path.join(folder, name, "cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=True, indent=0)


# Where transformers' LlamaTokenizer and sentencepiece part: spaces at the start of the text or
# after a special token, runs of spaces, special-token strings in the text.
SPACE_CASES = [" Hello", "   three leading", "trailing   ", "a  b   c    d", "\n  indented\n\n    more\n",
               " \n \n", "tab\t \tspace", "<s> after a special", "  <s>  spaces around  </s>  ",
               "line\n<s>\nline", "</s>x", "<unk> <s>"]


def train_sentencepiece_model(out):
    corpus_file = os.path.join(out, "corpus.tmp")
    with open(corpus_file, "w") as f:
        for text in CORPUS:
            f.write(text.replace("\r", "") + "\n")
    spm.SentencePieceTrainer.train(input=corpus_file, model_prefix=os.path.join(out, "tokenizer"),
                                   vocab_size=600, model_type="bpe", byte_fallback=True,
                                   character_coverage=0.995, unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, minloglevel=2,
                                   # Llama 2's settings: no normalization, digits split,
                                   # whitespace kept as it is.
                                   normalization_rule_name="identity", split_digits=True,
                                   remove_extra_whitespaces=False, allow_whitespace_only_pieces=True)
    os.remove(corpus_file)
    os.remove(os.path.join(out, "tokenizer.vocab"))


def write_sentencepiece_fixture(folder, name, switches):
    """A tokenizer.model folder (tokenizer_class LlamaTokenizer, plus `switches` such as legacy or
    add_prefix_space) with the ids transformers' AutoTokenizer gives for it: it converts the model
    to a tokenizers BPE, whose ids differ from sentencepiece's on leading spaces and special-token
    strings. The model is trained for "spm" when it is missing there (delete it to retrain: training
    is not byte-for-byte repeatable) and copied from "spm" for the others."""
    import shutil
    import transformers
    out = os.path.join(folder, name)
    os.makedirs(out, exist_ok=True)
    model = os.path.join(folder, "spm", "tokenizer.model")
    if name == "spm" and not os.path.exists(model):
        train_sentencepiece_model(out)
    elif name != "spm":
        shutil.copy(model, os.path.join(out, "tokenizer.model"))
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer", **switches}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    specials = ["<s>", "</s>"]
    cases = []
    for text in [SAMPLE] + short_cases(specials) + SPACE_CASES:
        for add_special in (True, False):
            ids = tok(text, add_special_tokens=add_special)["input_ids"]
            cases.append({"text": text, "add_special_tokens": add_special, "split_special_tokens": False,
                          "ids": ids, "decoded": tok.decode(ids)})
    for text in short_cases(specials)[-len(specials) - 1:] + SPACE_CASES[-5:]:
        cases.append({"text": text, "add_special_tokens": False, "split_special_tokens": True,
                      "ids": tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=True, indent=0)


def write_unigram_fixture(folder):
    """A SentencePiece Unigram tokenizer.model with the library's defaults (nmt_nfkc, extra
    whitespace removed), for the word-by-word tests, which compare with the linked library itself
    (no cases.json). Training is not byte-for-byte repeatable: remake it only to change it."""
    out = os.path.join(folder, "spm_unigram")
    os.makedirs(out, exist_ok=True)
    corpus_file = os.path.join(out, "corpus.tmp")
    with open(corpus_file, "w") as f:
        for text in CORPUS:
            f.write(text.replace("\r", "") + "\n")
    spm.SentencePieceTrainer.train(input=corpus_file, model_prefix=os.path.join(out, "tokenizer"),
                                   vocab_size=600, model_type="unigram", character_coverage=0.995,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    os.remove(corpus_file)
    os.remove(os.path.join(out, "tokenizer.vocab"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "add_eos_token": False}, f, indent=2)


# Characters of Unicode 15.0 (U+0CF3, U+11F00, U+1E4D0, U+11F50), 15.1 (U+2FFC, U+31EF,
# U+2EBF0) and 16.0 (U+1C89, U+1C8A, U+10D40, U+1CCF0, U+105C0), which PCRE2 10.42's tables lack
# (and utf8proc 2.8's, for 15.1 and 16.0), and of 17.0 (U+1E6C0), which tokenizers 0.23's lack
# too, beside letters, digits and marks.
UNICODE_16_TEXTS = [
    "a\u0cf3b k\u0cf3 x\U00011f00y \u2ffc\u31ef. \U0002ebf0\U0002ebf1z \u1c89\u1c8a ok",
    "\U0001e4d0\U0001e4d1 \U00011f50\U00011f51 9\U00010d40 x\U0001ccf0 \U000105c0\U000105c1 \U0001e6c0q",
    " \u1c89abc \u0cf3\u0cf3 12\U00011f50 ",
    # The GPT-2 fixtures' single_word token after letters of 15.1, 16.0 and 17.0.
    "x\u1c89[WORD] \U0002ebf0[WORD] \U0001e6c0[WORD] k\u0cf3[WORD]",
    # Canonical pairs Unicode 16.0 composes (U+105C9, U+11383), which Qwen2's NFC leaves apart.
    "a\U000105d2\u0307 \U00011382\U000113c9z",
]


def write_unicode_16_cases(folder):
    """unicode16_cases.json: for those texts, the pieces tokenizers' Split gives with GPT-2's,
    Llama 3's and Qwen2's patterns, and the ids of the tokenizer.json fixtures."""
    from tokenizers import Regex, pre_tokenizers
    gpt2 = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
    cases = {"pieces": [], "ids": []}
    for name, pattern in [("gpt2", gpt2), ("llama3", LLAMA3_PATTERN), ("qwen2", QWEN2_PATTERN)]:
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
        for text in UNICODE_16_TEXTS:
            cases["pieces"].append({"pattern": name, "text": text,
                                    "pieces": [p for p, _ in split.pre_tokenize_str(text)]})
    for name in ["gpt2", "gpt2_prefix", "llama3", "qwen2"]:
        tok = Tokenizer.from_file(os.path.join(folder, name, "tokenizer.json"))
        for text in UNICODE_16_TEXTS:
            cases["ids"].append({"fixture": name, "text": text,
                                 "ids": tok.encode(text, add_special_tokens=False).ids})
    with open(os.path.join(folder, "unicode16_cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=True, indent=0)


def main():
    """make_fixtures.py FOLDER [NAME ...]: all fixtures, or the named ones (training the
    SentencePiece model is not byte-for-byte repeatable, so remake only what changed)."""
    folder, names = sys.argv[1], set(sys.argv[2:])
    gpt2_specials = ["<|endoftext|>", "<mask>", "[WORD]", " dsx engine"]
    makers = {
        "gpt2": lambda: write_json_fixture(folder, "gpt2", *gpt2_style(), gpt2_specials),
        "gpt2_prefix": lambda: write_json_fixture(folder, "gpt2_prefix", *prefix_space_style(),
                                                  gpt2_specials),
        "llama3": lambda: write_json_fixture(folder, "llama3", *llama3_style(),
                                             ["<|begin_of_text|>", "<|eot_id|>", "<|rstrip|>"]),
        "qwen2": lambda: write_json_fixture(folder, "qwen2", *qwen2_style(),
                                            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
        "spm": lambda: write_sentencepiece_fixture(folder, "spm", {}),
        "spm_legacy": lambda: write_sentencepiece_fixture(folder, "spm_legacy", {"legacy": True}),
        "spm_no_prefix": lambda: write_sentencepiece_fixture(folder, "spm_no_prefix",
                                                             {"legacy": False, "add_prefix_space": False}),
        # After "spm": converted from it.
        "spm_json": lambda: write_json_fixture(folder, "spm_json", *sentencepiece_json_style(folder, False),
                                               ["<s>", "</s>"]),
        "spm_json_legacy": lambda: write_json_fixture(folder, "spm_json_legacy",
                                                      *sentencepiece_json_style(folder, True), ["<s>", "</s>"]),
        "unicode16": lambda: write_unicode_16_cases(folder),
        "spm_unigram": lambda: write_unigram_fixture(folder),
    }
    for name, make in makers.items():
        if not names or name in names:
            make()


if __name__ == "__main__":
    main()
