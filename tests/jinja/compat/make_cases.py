"""Writes tests/jinja/data/cases.json: templates with the variables they get and what transformers'
chat-template environment renders (text, {% generation %} byte ranges, or the error), so the C++
tests compare dsx's renderer with Jinja's without Python in CI.

Run with the peers venv (transformers + jinja2): python tests/jinja/compat/make_cases.py
"""
import json
import pathlib
import sys

from transformers.utils.chat_template_utils import _compile_jinja_template

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "data"

# Language features, each alone.
FEATURES = {
    "text_only": ("plain text\nover lines\n", {}),
    "print_values": ("{{ 1 }} {{ 1.5 }} {{ 2.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-5 }} {{ true }} {{ none }} {{ 'x' }} {{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': 1} }}|{{ missing }}|", {}),
    "arithmetic": ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.5 + 1 }} {{ -3 }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }}", {}),
    "comparisons": ("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 2 >= 3 }} {{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ not 0 }} {{ 1 and 'x' }} {{ 0 or 'y' }} {{ none or [] }}", {}),
    "conditional_expression": ("[{{ 'yes' if flag else 'no' }}][{{ 'only' if not flag }}]", {"flag": True}),
    "whitespace_blocks": ("a\n  {% if true %}\n    b\n  {% endif %}\nc\n{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\nd", {}),
    "whitespace_minus": ("a  {%- if true -%}  b  {%- endif -%}  c\n  {{- 'd' -}}  \n e", {}),
    "whitespace_plus": ("a\n  {%+ if true +%}\nb\n  {%- endif %}\nc", {}),
    "comments": ("a {# note #} b\n  {# line comment #}\nc {#- trimmed -#}  d", {}),
    "raw": ("{% raw %}{{ not evaluated }} {% if %}{% endraw %}!", {}),
    "string_escapes": ("{{ 'a\\nb\\t\\'q\\' \"d\" \\u00e9 \\\\' }}|{{ \"x\" 'y' }}", {}),
    "for_loop_variables": ("{% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem }}/{{ loop.cycle('o', 'e') }};{% endfor %}", {"items": ["a", "b", "c"]}),
    "for_else_and_filter": ("{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", {}),
    "for_unpack_items": ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'héllo' %}[{{ c }}]{% endfor %}", {"d": {"b": 1, "a": 2}}),
    "break_continue": ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    "scoping": ("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}|{% set ns = namespace(total=0) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}|{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}", {}),
    "set_forms": ("{% set a, b = [1, 2] %}{{ a }}{{ b }}|{% set block %}inside {{ a }}{% endset %}[{{ block }}]|{% set t = 1, 2 %}{{ t | length }}{{ t[1] }}", {}),
    "macros": ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}", {}),
    "subscripts_and_slices": ("{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ 'héllo'[1:3] }} {{ 'abc'[-1] }} {{ d['k'] }} {{ d.k }} [{{ d.missing }}] [{{ xs[10] }}] [{{ n.attr }}]", {"xs": [1, 2, 3, 4], "d": {"k": "v"}, "n": None}),
    "string_methods": ("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}", {}),
    "dict_methods": ("{{ d.keys() | join(',') }} {{ d.values() | list }} {% for k, v in d.items() %}{{ k }}:{{ v }} {% endfor %}{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }}", {"d": {"a": 1, "b": [2]}}),
    "filters_text": ("{{ '  t  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'ab cd' | title }}|{{ 'ab' | capitalize }}|{{ 3 | string }}|{{ '<a&b>' | e }}|{{ 'x\\ny' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}|{{ 'aXa' | replace('a', 'b') }}|{{ 'one two' | wordcount }}|{{ 'a' | safe }}", {}),
    "filters_sequences": ("{{ xs | length }} {{ xs | count }} {{ 'héllo' | length }} {{ xs | first }} {{ xs | last }} {{ xs | join(', ') }} {{ xs | reverse | list }} {{ 'abc' | reverse }} {{ [3, 1, 2] | sort }} {{ [1, 1, 2] | unique | list }} {{ [1, 2, 3] | sum }} {{ [3, 1] | min }} {{ [3, 1] | max }} {{ 'ab' | list }} {{ missing | length }}", {"xs": [1, 2, 3]}),
    "filters_select": ("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ ms | rejectattr('role', 'equalto', 'user') | list | length }} {{ ms | map(attribute='content') | join('/') }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ ms | selectattr('extra') | list | length }} {{ ms | selectattr('extra', 'defined') | list | length }} {{ ['a', 'B'] | map('upper') | list }}", {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "extra": 1}, {"role": "user", "content": "c"}]}),
    "filters_default_and_numbers": ("[{{ missing | default('d') }}][{{ '' | default('d') }}][{{ '' | default('d', true) }}][{{ none | default('d') }}] {{ '42' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 7 | round(method='floor') }}", {}),
    "filter_block": ("{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    "tests": ("{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ x is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ d is mapping }} {{ xs is iterable }} {{ 'x' is sequence }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 'a' is in 'abc' }} {{ 1 is lt 2 }} {{ x is not none }} {{ 'abc' is lower }} {{ range is callable }} {{ x is sameas 'v' }}", {"x": "v", "n": None, "d": {}, "xs": []}),
    "tojson": ("{{ v | tojson }}\n{{ v | tojson(indent=2) }}\n{{ v | tojson(sort_keys=true) }}\n{{ v | tojson(separators=(',', ':')) }}\n{{ 'é\"\\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ 1.0 | tojson }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}", {"v": {"b": [1, 2.5, None, True, "s"], "a": {"nested": {}}, "u": "\u65e5\u672c"}}),
    "globals": ("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }} {{ dict(a=1, b='x') }} {{ namespace(v=1).v }}", {}),
    "raise_exception": ("before{{ raise_exception('Roles must alternate') }}", {}),
    "error_undefined_attribute": ("{{ nothing.attr }}", {}),
    "error_bad_operands": ("{{ 'a' + 1 }}", {}),
}

CONVERSATIONS = {
    "single_turn": [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "General Kenobi."}],
    "with_system": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "  What is 2+2?  "},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And in French, avec des accents: é?"},
        {"role": "assistant", "content": "Quatre — «4»."},
    ],
    "open_user": [{"role": "user", "content": "Write a haiku about loss curves."}],
    "tool_call": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "content": "{\"temperature\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
    ],
}

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]


def byte_offset(text, index):
    return len(text[:index].encode("utf-8"))


def render(template, variables):
    compiled = _compile_jinja_template(template)
    blocks, indices = [], []
    try:
        with compiled.environment.activate_tracker(blocks, indices):
            for block in compiled.generate(**variables):
                blocks.append(block)
    except Exception as error:  # the case expects this error
        return {"error": str(error)}
    text = "".join(blocks)
    return {"text": text, "generation": [[byte_offset(text, a), byte_offset(text, b)] for a, b in indices]}


def main():
    cases = []
    for name, (template, variables) in FEATURES.items():
        cases.append({"name": name, "template": template, "variables": variables, **render(template, variables)})
    for path in sorted((DATA / "templates").glob("*.jinja")):
        template = path.read_text()
        for conversation, messages in CONVERSATIONS.items():
            for generation_prompt in (False, True):
                variables = {"messages": messages, "add_generation_prompt": generation_prompt,
                             "bos_token": "<s>", "eos_token": "</s>"}
                if conversation == "tool_call":
                    variables["tools"] = TOOLS
                name = f"{path.stem}.{conversation}{'.generation_prompt' if generation_prompt else ''}"
                cases.append({"name": name, "template_file": path.name, "variables": variables,
                              **render(template, variables)})
    out = DATA / "cases.json"
    out.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: {len(cases)} cases, {sum('error' in c for c in cases)} expecting an error", file=sys.stderr)


if __name__ == "__main__":
    main()
