"""Where dsx's Unigram ids (a tokenizer.model through Debian's libsentencepiece 0.1.97) part from
sentencepiece's PyPI wheel and from transformers' AutoTokenizer (tokenizers' Unigram). Trains a
Unigram model on the fixtures' corpus, then encodes every non-blank line of a multilingual text as
one document with each, twice: with the trained scores, and with every piece scored -0.1 per
character, where all segmentations of a word tie in exact arithmetic and float rounding decides.
Not run in CI (needs the venv of check_with_hf.sh):

    VENV=/tmp/tokvenv python3 tests/tokenizer/compat/unigram_tie_break.py [BUILD_DIR]
"""

import json
import os
import subprocess
import sys
import tempfile

import sentencepiece as spm
import transformers
from sentencepiece import sentencepiece_model_pb2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multilingual_text import make_text  # noqa: E402


def dsx_ids(build, folder, docs_file, count):
    out = os.path.join(folder, "dsx.ids")
    subprocess.run([os.path.join(build, "tests/tokenizer/tokenizer_dump_ids"), folder, docs_file, out, "--lines"],
                   check=True)
    with open(out) as f:
        return [[int(v) for v in line.split()] for line in f.read().split("\n")[:count]]


def compare(build, work, name, model):
    folder = os.path.join(work, name)
    os.makedirs(folder)
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(model.SerializeToString())
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False}, f)
    docs_file = os.path.join(work, "docs.txt")
    with open(docs_file, newline="") as f:
        docs = f.read().split("\n")[:-1]
    ours = dsx_ids(build, folder, docs_file, len(docs))
    wheel = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    pypi = [wheel.encode(d) for d in docs]
    hf = transformers.AutoTokenizer.from_pretrained(folder)
    hf_ids = [hf(d, add_special_tokens=False)["input_ids"] for d in docs]
    differ = [i for i in range(len(docs)) if ours[i] != pypi[i]]
    shorter = sum(len(pypi[i]) < len(ours[i]) for i in differ)
    print(f"{name}: {len(docs)} documents; dsx (the linked libsentencepiece) vs sentencepiece "
          f"{spm.__version__}: {len(differ)} differ ({shorter} of them with fewer pieces from the "
          f"wheel); vs transformers {transformers.__version__}: "
          f"{sum(a != b for a, b in zip(ours, hf_ids))} differ; wheel vs transformers: "
          f"{sum(a != b for a, b in zip(pypi, hf_ids))} differ")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as work:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("\n".join(make_text(seed, 2000).replace("\r", "") for seed in range(1000)))
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(work, "unigram"), vocab_size=800,
                                       model_type="unigram", byte_fallback=True, character_coverage=0.995,
                                       normalization_rule_name="identity", split_digits=True,
                                       remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
                                       minloglevel=2)
        with open(os.path.join(work, "docs.txt"), "w", newline="") as f:
            f.write("\n".join(line for line in make_text(555, 400_000).split("\n") if line.strip()) + "\n")
        model = sentencepiece_model_pb2.ModelProto()
        with open(os.path.join(work, "unigram.model"), "rb") as f:
            model.ParseFromString(f.read())
        compare(build, work, "trained scores", model)
        for piece in model.pieces:
            if piece.type == piece.NORMAL:
                piece.score = -0.1 * len(piece.piece)
        compare(build, work, "tied scores", model)


if __name__ == "__main__":
    main()
