"""The job `dsx tokenize` does, as a Hugging Face `tokenizers` user writes it: load tokenizer.json,
read the text, `encode_batch` every document on all threads (RAYON's default pool), EOS after each,
write the ids (uint32) to a file. The benchmark times this whole process.

    python hf_tokenize_job.py MODEL_DIR TEXT OUT_FILE
"""

import json
import os
import sys

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from documents import read_documents  # noqa: E402

model, text, out = sys.argv[1:4]
tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
tok.encode_special_tokens = True  # as dsx tokenize: special-token strings in data are text
with open(os.path.join(model, "tokenizer_config.json")) as f:
    eos = tok.token_to_id(json.load(f)["eos_token"])
ids = []
for encoding in tok.encode_batch(read_documents(text)):  # with the post-processor's BOS
    ids.extend(encoding.ids)
    ids.append(eos)
np.array(ids, dtype=np.uint32).tofile(out)
