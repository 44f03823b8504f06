"""The documents of a text file as `dsx tokenize` cuts them (dataset/document_split.h): every
line with its '\\n', blank (whitespace-only) lines skipped. Shared by the peers' jobs so all sides
encode the same documents."""

BLANK = " \t\r\n\f\v"


def read_documents(path):
    with open(path, encoding="utf-8", newline="") as f:
        parts = f.read().split("\n")
    docs = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        docs.append(parts[-1])
    return [d for d in docs if d.strip(BLANK)]
