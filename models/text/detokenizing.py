"""Detokenizing: PTB tokens back to written text, in-graph."""

import tensorflow as tf

from models.text.cjk import CJK_LETTERS, CJK_SYMBOLS

# The ordinals of a quarter or a half, which Gigaword masks (`#st-qtr`): each
# one's digits, its spelled forms and the periods it can have (a half is
# 1st or 2nd).
PERIOD_ORDINALS = (
    ("1st", "first|1st", "qtr|quarter|half"),
    ("2nd", "second|2nd", "qtr|quarter|half"),
    ("3rd", "third|3rd", "qtr|quarter"),
    ("4th", "fourth|4th", "qtr|quarter"),
)
# (pattern, rewrite) pairs from a PTB token back to written text.
_DETOKENIZE = (
    ("(?i)^-lrb-$", "("),
    ("(?i)^-rrb-$", ")"),
    ("(?i)^-lsb-$", "["),
    ("(?i)^-rsb-$", "]"),
    ("(?i)^-lcb-$", "{"),
    ("(?i)^-rcb-$", "}"),
    (r"\\/", "/"),
    ("(?i)&amp;", "&"),
    ("^``$", "\u201c"),
    ("^''$", "\u201d"),
    ("^--$", "\u2014"),
    # Gigaword's masked ordinals of a quarter or a half (`#st-qtr`), which
    # the source rarely writes in digits: the suffix decides the digit.
    *(
        (f"^#{digits[1:]}-({periods})$", f"{digits}-\\1")
        for digits, _, periods in PERIOD_ORDINALS
    ),
)
# Tokens written against the one before (`Japan's`, `12%`, `won't`), and
# tokens the next one is written against (`$4.3`, `US$5.2`, `(Python`).
_CLOSES = "[,.;:?!%)\\]}\u201d']|\\.\\.\\.|(?i:n't|'(?:s|re|ve|ll|d|m))"
_OPENS = "[$(\\[{\u201c]|\\p{L}{1,3}\\$"
# Chinese and Japanese are written without spaces: their punctuation against
# any neighbour (`。NEC`), their letters against each other and against
# numbers (`2024年`), but a space kept from a Latin word (`B.C. から`).
_CJK_SYMBOL = f"[{CJK_SYMBOLS}]"
_CJK_LETTER = f"[{CJK_LETTERS}]"
_NUMBER = r"[\p{N}#][\p{N}#,.]*"
# Of those, what cannot open a text: it belonged to a word left out.
_ORPHANS = "[,;:]|(?i:n't|'(?:s|re|ve|ll|d|m))"
# Leading punctuation, the first character, the rest.
_FIRST = r"(?s)^([\p{P}\p{S}\s]*)(.?)(.*)$"
# The regexes (RE2) of `detokenize`, by name: what an ids-level export
# writes down for a client outside TensorFlow (`models.export.text_contract`).
PATTERNS = {
    "words": _DETOKENIZE,
    "closes": _CLOSES,
    "opens": _OPENS,
    "cjk_symbol": _CJK_SYMBOL,
    "cjk_letter": _CJK_LETTER,
    "number": _NUMBER,
    "orphans": _ORPHANS,
    "first": _FIRST,
}


def detokenize_words(tokens):
    r"""Each PTB token as it is written: `-lrb-` as `(`, `\/` as `/`, ...

    The rewrites of `detokenize`, word by word, without joining: the labels
    of an attention heatmap.

    Args:
        tokens: `tf.string` of any shape.

    Returns:
        `tf.string` of the same shape.
    """
    for pattern, rewrite in _DETOKENIZE:
        tokens = tf.strings.regex_replace(tokens, pattern, rewrite)
    return tokens


def detokenize(tokens):
    r"""PTB tokens to written text, first letter capitalized, in-graph.

    `japan 's nec cuts 2,500 jobs -lrb- 12 % -rrb-` becomes
    `Japan's nec cuts 2,500 jobs (12%)`: brackets and the `&amp;`, `\/`
    escapes restored, ``` `` ``` / `''` as typographic quotes, `--` as a dash,
    punctuation, `'s` and `n't` joined to the word before, `$` and opening
    brackets to the word after; a period after an abbreviation's is dropped.
    Chinese and Japanese characters are written without spaces between them
    or around their punctuation or numbers: `東 京 で 2024 年 。 nec の` becomes
    `東京で2024年。nec の`.

    Args:
        tokens: `tf.string` `[batch, T]`, "" for no token, or a ragged
            `[batch, None]`.

    Returns:
        `tf.string` `[batch]`.
    """
    if not isinstance(tokens, tf.RaggedTensor):
        tokens = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(tokens, tf.string))
    tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(tokens, ""))
    tokens = _without_leading_closers(tokens)
    words = detokenize_words(tokens.flat_values)
    first = tf.equal(tf.ragged.range(tokens.row_lengths()).flat_values, 0)
    previous = tf.concat([[""], words[:-1]], axis=0)
    glued = (
        tf.strings.regex_full_match(words, _CLOSES)
        | tf.strings.regex_full_match(previous, _OPENS)
        | _written_against(words, previous)
    )
    # `Calif.` ending the text is followed by the sentence's own period.
    repeated = tf.logical_and(
        tf.equal(words, "."), tf.strings.regex_full_match(previous, r".*\.")
    )
    words = tf.where(tf.logical_and(repeated, ~first), "", words)
    spaced = tf.where(tf.logical_or(glued, first), words, " " + words)
    x = tf.strings.reduce_join(tokens.with_flat_values(spaced), axis=1)
    # Upper-case the first character after any leading punctuation.
    lead, head, rest = (
        tf.strings.regex_replace(x, _FIRST, group) for group in (r"\1", r"\2", r"\3")
    )
    return lead + tf.strings.upper(head, encoding="utf-8") + rest


def _written_against(words, previous):
    """Where a Chinese or Japanese word and the one before take no space."""

    def is_(x, pattern):
        return tf.strings.regex_full_match(x, pattern)

    letter, letter_before = is_(words, _CJK_LETTER), is_(previous, _CJK_LETTER)
    return (
        is_(words, _CJK_SYMBOL)
        | is_(previous, _CJK_SYMBOL)
        | (letter & (letter_before | is_(previous, _NUMBER)))
        | (letter_before & is_(words, _NUMBER))
    )


def _without_leading_closers(tokens):
    """`tokens` less the `'s`, `n't`, commas, colons that open a row.

    They are written against the word before, and there is none: the word
    they belonged to was left out (an unknown word in a readable headline).
    """
    closes = tf.strings.regex_full_match(tokens.flat_values, _ORPHANS)
    closes = tokens.with_flat_values(tf.cast(closes, tf.int32)).to_tensor(0)
    leading = tf.math.cumprod(closes, axis=1)
    keep = tf.RaggedTensor.from_tensor(tf.equal(leading, 0), tokens.row_lengths())
    return tf.ragged.boolean_mask(tokens, keep)
