"""The SavedModel's text steps, written down for a client outside TensorFlow.

The tokenizer and the detokenizer are RE2 regexes over stock TensorFlow
string ops (`models.text`), which ONNX has no op for. An ids-level export
(`models.export.onnx_model`) writes them into its JSON instead, translated
for Python's `re` (`serving.onnx_text` applies them): RE2's Unicode classes
(`\\p{Han}`, `\\p{Nd}`, `\\p{L}`, ...) become explicit code point ranges,
which `re` reads under `re.ASCII` as RE2 reads its own (`\\b`, `\\s` and
`(?i)` over ASCII only).
"""

import functools
import re

# `\p{Name}` and `\pN`, RE2's Unicode classes.
_CLASS = re.compile(r"\\p\{(\w+)\}|\\p(\w)")


@functools.cache
def class_ranges(name):
    """The ranges of the Unicode class `name` (`Han`, `Nd`, `Z`, ...), as
    the inside of a Python `re` character class: `\\u4e00-\\u9fff...`."""
    import regex

    everything = "".join(map(chr, range(0x110000)))
    found = regex.finditer(rf"\p{{{name}}}+", everything)
    return "".join(
        _escape(m.start())
        + ("-" + _escape(m.end() - 1) if m.end() - 1 > m.start() else "")
        for m in found
    )


def _escape(code_point):
    return f"\\u{code_point:04x}" if code_point < 0x10000 else f"\\U{code_point:08x}"


def python_pattern(pattern):
    """RE2 `pattern` as a Python `re` pattern (compiled with `re.ASCII`).

    Example:

    >>> python_pattern(r"[#\\p{Nd}],")[:22]
    '[#\\\\u0030-\\\\u0039\\\\u0660-'
    """
    out, opened, i = [], None, 0  # `opened`: where the open class starts
    while i < len(pattern):
        match = _CLASS.match(pattern, i)
        if match:
            ranges = class_ranges(match.group(1) or match.group(2))
            out.append(ranges if opened is not None else f"[{ranges}]")
            i = match.end()
            continue
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if char == "[" and opened is None:
            opened = len(out) + 1
        # A `]` first in a class (`[]`, `[^]`) is a literal one.
        elif char == "]" and opened is not None:
            if "".join(out[opened:]) not in ("", "^"):
                opened = None
        out.append(char)
        i += 1
    return "".join(out)


def _rules(pairs):
    return [[python_pattern(p), rewrite] for p, rewrite in pairs]


def text_contract():
    """The `text` entry of an ids-level export's JSON: every regex of the
    SavedModel's text steps, for Python's `re`, by step."""
    from models.text import detokenizing, features, tokenizing

    tokenizer, detokenizer = tokenizing.PATTERNS, detokenizing.PATTERNS
    return {
        "regex_flags": "ASCII",
        "prepare": _rules(tokenizer["prepare"]),
        "rules": _rules(tokenizer["rules"]),
        "digit": python_pattern(r"\p{Nd}"),
        "detokenize_words": _rules(detokenizer["words"]),
        **{
            name: python_pattern(pattern)
            for name, pattern in detokenizer.items()
            if name != "words"
        },
        "periods": features.PERIODS,
        "period_ordinals": [list(o) for o in detokenizing.PERIOD_ORDINALS],
    }
