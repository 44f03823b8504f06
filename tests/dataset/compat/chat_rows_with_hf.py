"""The Python side of check_chat_with_hf.sh.

  chat_rows_with_hf.py write FOLDER OUT_JSONL          seeded conversations for FOLDER's template
  chat_rows_with_hf.py compare FOLDER JSONL T DSX NAME  transformers' rows beside dsx's
"""
import json
import random
import sys

from transformers import AutoTokenizer

WORDS = ["the", "fox", "Hello", "world", "é", "naïve", "日本語", "текст", "😀", "123", "x+y", "\n", "  ", "ok."]
TOOLS = [{"type": "function", "function": {"name": "get_time", "description": "The time in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def sentence(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))).strip() or "hi"


def conversations(folder, seed=20261204, count=40):
    template = open(f"{folder}/chat_template.jinja").read()
    rng = random.Random(seed)
    for k in range(count):
        messages = []
        if "System role not supported" not in template and "system" in template and rng.random() < 0.5:
            messages.append({"role": "system", "content": sentence(rng)})
        for _ in range(rng.randint(1, 4)):
            messages += [{"role": "user", "content": sentence(rng)},
                         {"role": "assistant", "content": sentence(rng)}]
        line = {"messages": messages}
        if "tools" in template and k % 2:
            line["tools"] = TOOLS
        if k % 3 == 2:  # TRL's conversational prompt-completion form
            line = {"prompt": messages[:-1], "completion": messages[-1:]}
        yield line


def hf_example(tok, line):
    """(ids, trained) of a JSONL line as transformers renders and tokenizes it."""
    tools = line.get("tools")
    render = lambda m, gen: tok.apply_chat_template(m, tools=tools, tokenize=False, add_generation_prompt=gen)
    if "messages" in line:
        messages = line["messages"]
        target = [m["role"] == "assistant" for m in messages]
    else:
        messages = line["prompt"] + line["completion"]
        target = [False] * len(line["prompt"]) + [True] * len(line["completion"])
    if "messages" in line and "{% generation %}" in tok.chat_template.replace("{%-", "{%").replace("-%}", "%}"):
        enc = tok.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        return list(enc["input_ids"]), [bool(x) for x in enc["assistant_masks"]]
    text = render(messages, False)
    spans, i = [], 0
    while i < len(messages):
        if not target[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(messages) and target[j + 1]:
            j += 1
        spans.append((len(render(messages[:i], True)), len(render(messages[:j + 1], False))))
        i = j + 1
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    trained = [any(a < e and b > s for s, e in spans) for a, b in enc["offset_mapping"]]
    return list(enc["input_ids"]), trained


def rows(tok, lines, T):
    eos = tok.eos_token_id
    for line in lines:
        ids, trained = hf_example(tok, line)
        ids, trained = ids[:T + 1], trained[:T + 1]
        if not any(trained[1:]):
            continue
        inputs = [ids[i] if i < len(ids) else eos for i in range(T)]
        targets = [ids[i + 1] if i + 1 < len(ids) and trained[i + 1] else -1 for i in range(T)]
        yield inputs, targets


def main():
    if sys.argv[1] == "write":
        folder, out = sys.argv[2:4]
        with open(out, "w", encoding="utf-8") as f:
            for line in conversations(folder):
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        return 0
    folder, jsonl, T, dsx_file, name = sys.argv[2:7]
    tok = AutoTokenizer.from_pretrained(folder)
    lines = [json.loads(l) for l in open(jsonl, encoding="utf-8")]
    want = list(rows(tok, lines, int(T)))
    got = [json.loads(l) for l in open(dsx_file)]
    bad = 0
    if len(got) != len(want):
        print(f"{name}: dsx made {len(got)} rows, transformers {len(want)}")
        return 1
    for r, ((inputs, targets), row) in enumerate(zip(want, got)):
        if row["inputs"] != inputs or row["targets"] != targets:
            bad += 1
            if bad <= 2:
                at = next(i for i in range(int(T)) if row["inputs"][i] != inputs[i] or row["targets"][i] != targets[i])
                print(f"{name}: row {r} differs from position {at}: dsx {row['inputs'][at]}/{row['targets'][at]}, "
                      f"transformers {inputs[at]}/{targets[at]}")
    trained = sum(t >= 0 for _, targets in want for t in targets)
    print(f"{name}: {len(want)} rows, {trained} trained positions: {'same' if bad == 0 else f'{bad} rows differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
