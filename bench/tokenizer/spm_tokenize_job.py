"""The job `dsx tokenize` does, as a `sentencepiece` user writes it: load tokenizer.model, read
the text, `encode` the list of documents on all threads (num_threads, sentencepiece 0.2), BOS
before and EOS after each, write the ids (uint32) to a file. The benchmark times this whole process.

    python spm_tokenize_job.py MODEL_DIR TEXT OUT_FILE
"""

import os
import sys

import numpy as np
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from documents import read_documents  # noqa: E402

model, text, out = sys.argv[1:4]
sp = spm.SentencePieceProcessor(model_file=os.path.join(model, "tokenizer.model"))
ids = []
for doc in sp.encode(read_documents(text), add_bos=True, add_eos=True,
                     num_threads=os.cpu_count()):
    ids.extend(doc)
np.array(ids, dtype=np.uint32).tofile(out)
