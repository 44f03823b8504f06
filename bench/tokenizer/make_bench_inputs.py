"""The inputs of the tokenizer benchmark, made in the run (nothing downloaded): the text, and
tokenizers with 32,000-entry vocabularies trained on the same generator, each in a folder laid out
as a Hugging Face model folder (tokenizer.json or tokenizer.model, and tokenizer_config.json):

    gpt2-32k       byte-level BPE, GPT-2's ByteLevel regex
    llama3-32k     byte-level BPE, Llama 3's Split regex, ignore_merges, a BOS template
    qwen2-32k      byte-level BPE, NFC, Qwen2's single-digit Split regex
    spm-bpe-32k    a SentencePiece BPE tokenizer.model with Llama 2's settings (no normalization,
                   digits split, byte fallback): the tokenizer.model-only folder
    spm-bpe-32k-json  the same model as transformers converts it to tokenizer.json (Metaspace,
                   byte fallback), the form of Llama 2's and Mistral's tokenizer.json
    spm-uni-32k    a SentencePiece unigram tokenizer.model with the library's defaults (nmt_nfkc)

    python make_bench_inputs.py WORK SIZE_MB     (writes WORK/text.txt and WORK/<name>/)
"""

import json
import os
import sys

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer", "compat"))
from multilingual_text import make_soup, make_text  # noqa: E402

VOCAB = 32000
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# The generator's sentences repeat a few hundred words; the soup of random code points gives the
# trainers enough distinct pieces to fill 32,000 entries.
TRAINING = [make_text(seed, 5000) for seed in range(1000, 1400)] + \
           [make_soup(seed, 5000) for seed in range(2000, 2200)]


def save(work, name, tok, config):
    os.makedirs(os.path.join(work, name), exist_ok=True)
    tok.save(os.path.join(work, name, "tokenizer.json"))
    write_config(work, name, config)


def write_config(work, name, config):
    with open(os.path.join(work, name, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def byte_level_bpe(ignore_merges, pre_tokenizer, eos):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TRAINING, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=[eos], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def split_then_byte_level(pattern):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def gpt2(work):
    tok = byte_level_bpe(False, pre_tokenizers.ByteLevel(add_prefix_space=False), "<|endoftext|>")
    save(work, "gpt2-32k", tok, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                 "tokenizer_class": "GPT2Tokenizer"})


def llama3(work):
    tok = byte_level_bpe(True, split_then_byte_level(LLAMA3_PATTERN), "<|end_of_text|>")
    tok.add_special_tokens([AddedToken("<|begin_of_text|>", special=True)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    save(work, "llama3-32k", tok, {"bos_token": "<|begin_of_text|>",
                                   "eos_token": "<|end_of_text|>",
                                   "tokenizer_class": "PreTrainedTokenizerFast"})


def qwen2(work):
    tok = byte_level_bpe(False, split_then_byte_level(QWEN2_PATTERN), "<|endoftext|>")
    tok.normalizer = normalizers.NFC()
    save(work, "qwen2-32k", tok, {"bos_token": None, "eos_token": "<|endoftext|>",
                                  "tokenizer_class": "Qwen2Tokenizer"})


def sentencepiece_model(work, name, corpus_file, **settings):
    out = os.path.join(work, name)
    os.makedirs(out, exist_ok=True)
    spm.SentencePieceTrainer.train(input=corpus_file, model_prefix=os.path.join(out, "tokenizer"),
                                   vocab_size=VOCAB, hard_vocab_limit=False, unk_id=0, bos_id=1,
                                   eos_id=2, pad_id=-1, minloglevel=2, num_threads=2, **settings)
    os.remove(os.path.join(out, "tokenizer.vocab"))
    write_config(work, name, {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                              "eos_token": "</s>", "unk_token": "<unk>",
                              "tokenizer_class": "LlamaTokenizer"})


def sentencepiece_models(work):
    corpus_file = os.path.join(work, "spm-corpus.txt")
    with open(corpus_file, "w") as f:
        for text in TRAINING:
            f.write(text.replace("\r", "") + "\n")
    # Llama 2's settings.
    sentencepiece_model(work, "spm-bpe-32k", corpus_file, model_type="bpe", byte_fallback=True,
                        character_coverage=0.9995, normalization_rule_name="identity",
                        split_digits=True, remove_extra_whitespaces=False,
                        allow_whitespace_only_pieces=True)
    sentencepiece_model(work, "spm-uni-32k", corpus_file, model_type="unigram",
                        character_coverage=0.9995)
    os.remove(corpus_file)


def sentencepiece_json(work):
    """spm-bpe-32k as transformers converts it, which is what save_pretrained writes."""
    import transformers
    folder = os.path.join(work, "spm-bpe-32k")
    tok = transformers.AutoTokenizer.from_pretrained(folder).backend_tokenizer
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        config = json.load(f)
    save(work, "spm-bpe-32k-json", tok, config)
    # Named LlamaTokenizer, the tokenizer.model folder would take transformers' rules in dsx too
    # (docs/tokenizers.md), which is what the -json row measures; without the class it is the
    # library's model, the one the sentencepiece package is compared with.
    del config["tokenizer_class"]
    write_config(work, "spm-bpe-32k", config)


def main():
    work, size_mb = sys.argv[1], float(sys.argv[2])
    with open(os.path.join(work, "text.txt"), "w", newline="") as f:
        f.write(make_text(31337, int(size_mb * 1e6 * 0.7)))
    for make in (gpt2, llama3, qwen2, sentencepiece_models, sentencepiece_json):
        make(work)


if __name__ == "__main__":
    main()
