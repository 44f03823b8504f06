"""Multilingual text made from a seed: the training corpus of the fixture tokenizers, the sample
the tests check and the >= 1 MB text of check_with_hf.sh. Written here, not downloaded: several
scripts, emoji (with skin tones and ZWJ sequences), decomposed combining marks, digit runs,
contractions in mixed case, runs of spaces and tabs, CRLF, no-break and ideographic spaces."""

import random

SENTENCES = [
    "The quick brown fox jumps over the lazy dog; it's 12345 metres, isn't it?",
    "We'll see: THEY'LL say I'M right, YOU'VE heard it, she'd agree.",
    "Größe, Übermaß und Straße — das Wetter in München ist heute 23°C.",
    "Le cœur a ses raisons que la raison ne connaît point. Où est l'hôtel ?",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Αλφάβητο 2024.",
    "مرحبا بالعالم، هذا نص عربي للتجربة ١٢٣٤٥٦.",
    "שלום עולם, זהו טקסט בעברית.",
    "नमस्ते दुनिया, यह हिंदी का पाठ है। १२३",
    "我能吞下玻璃而不伤身体。今天是2026年12月3日。",
    "私はガラスを食べられます。それは私を傷つけません。カタカナ",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🤖✨🔥 and flags 🇩🇪🇯🇵.",
    "Decomposed: cafe\u0301, nai\u0308ve, A\u030angstro\u0308m, e\u0301\u0301 and pre-composed: café, naïve.",
    "Code: for (int i = 0; i < n; ++i) { sum += x[i] * 3.14159; }  // done",
    "Numbers 0 1 22 333 4444 55555 666666 7777777, 3.5e-10 and 1,000,000.00 $ € ¥ £.",
    "Tabs\tand\t\tmany    spaces     here\u00a0no-break\u3000ideographic end.",
    "Windows line\r\nendings\r\n\r\nand Unix\n\n\nnewlines   \n  indented",
    "URLs like https://example.org/path?q=1&r=2#frag and mail@example.com.",
    "Mixed: abc123def ΑΒΓ123 日本語123 __init__ snake_case CamelCaseWord",
    "Quotes “curly” ‘single’ «guillemets» „German“ and 'straight' \"double\".",
]

WORDS = " ".join(SENTENCES).split()
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "    "]


def make_text(seed, size):
    """About `size` characters: sentences, shuffled words, random numbers and whitespace."""
    rng = random.Random(seed)
    parts = []
    total = 0
    while total < size:
        choice = rng.random()
        if choice < 0.5:
            piece = rng.choice(SENTENCES)
        elif choice < 0.85:
            piece = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        else:
            piece = str(rng.randint(0, 10 ** rng.randint(1, 9)))
        piece += rng.choice(SPACES)
        parts.append(piece)
        total += len(piece)
    return "".join(parts)


# Code point ranges for random "soup": Latin with diacritics, combining marks, Greek, Cyrillic,
# Hebrew and Arabic, Devanagari, Thai, Hangul Jamo, general punctuation (with the odd spaces),
# CJK punctuation and kana, CJK ideographs, Hangul syllables, emoji.
SOUP_RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
               (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
               (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F6FF)]
SOUP_EXTRAS = ["\r\n", "\n", "\t", "\u0085", "\u2028", "  ", "'s", "'LL", "123456"]


def make_soup(seed, size):
    """About `size` characters of random code points from SOUP_RANGES, in runs of one script."""
    rng = random.Random(seed)
    out = []
    total = 0
    while total < size:
        if rng.random() < 0.1:
            piece = rng.choice(SOUP_EXTRAS)
        else:
            lo, hi = rng.choice(SOUP_RANGES)
            piece = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))
            piece += " " if rng.random() < 0.6 else ""
        out.append(piece)
        total += len(piece)
    return "".join(out)
