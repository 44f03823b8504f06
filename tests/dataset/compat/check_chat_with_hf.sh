#!/usr/bin/env bash
# The rows dsx makes of conversations (--data jsonl:FILE with "messages" or TRL's conversational
# "prompt"/"completion") beside the ones transformers gives: for each fixture tokenizer of
# tests/tokenizer/data/ with a template of tests/jinja/data/templates/ as its chat_template.jinja,
# seeded random conversations (multilingual content, optional system turn, 1-4 exchanges, tools
# for the tools template) are rendered by apply_chat_template and tokenized in one piece with
# offsets; a token is trained on where it overlaps the assistant's text, which is the template's
# {% generation %} blocks (return_assistant_tokens_mask) or, without them, the per-turn prefix
# rule of docs/tokenizers.md (TRL's prompt/completion split). Inputs and targets must be equal,
# position by position. Not run in CI (needs the venv).
#
#   bash tests/dataset/compat/check_chat_with_hf.sh [BUILD_DIR]     (default build)
#
# VENV (default /tmp/chatvenv) must have transformers and jinja2 (no torch needed):
#   python3 -m venv /tmp/chatvenv && /tmp/chatvenv/bin/pip install transformers jinja2
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$root/build}
venv=${VENV:-/tmp/chatvenv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --build "$build" --target chat_rows_dump -j1 >/dev/null

status=0
# fixture:template pairs; the fixture's special tokens are the ones the template writes.
for pair in llama3:llama3.jinja qwen2:chatml.jinja qwen2:chatml_generation.jinja qwen2:qwen2_tools.jinja \
            gpt2:zephyr.jinja gpt2:gemma.jinja gpt2:mistral.jinja; do
  fixture=${pair%%:*} template=${pair#*:}
  folder=$work/$fixture-${template%.jinja}
  mkdir -p "$folder"
  cp "$root/tests/tokenizer/data/$fixture"/tokenizer*.json "$folder/"
  cp "$root/tests/jinja/data/templates/$template" "$folder/chat_template.jinja"
  "$venv/bin/python" "$root/tests/dataset/compat/chat_rows_with_hf.py" write "$folder" "$work/$pair.jsonl"
  "$build/tests/dataset/chat_rows_dump" "$folder" "$work/$pair.jsonl" 256 "$work/$pair.dsx"
  "$venv/bin/python" "$root/tests/dataset/compat/chat_rows_with_hf.py" compare "$folder" "$work/$pair.jsonl" 256 \
    "$work/$pair.dsx" "$pair" || status=1
done
exit $status
