"""In-graph text normalization matching the Gigaword headline data.

The Gigaword pairs (Rush et al., 2015) are lowercased, PTB-tokenized, and have
every digit replaced by `#`:

    Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.
    japan 's nec corp. said on wednesday it would cut #,### jobs .

`normalize` turns raw text into that form with stock TensorFlow string ops only
(`tf.strings.*`, RE2 `regex_replace`): no `tensorflow-text`, no `py_function`,
so a SavedModel that calls it runs on stock TF Serving. RE2 has no look-around,
so the rules below use capture groups and a private marker character instead.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence

import tensorflow as tf

from models.config import NORMALIZATION_CHOICES

# The reserved tokens, defined here only: the vocabulary starts with them in
# this order, so their ids are their positions (`models.features`).
PAD = "<pad>"
UNK = "<unk>"
START = "<s>"
END = "</s>"
RESERVED = (PAD, UNK, START, END)

# Gigaword writes rare words as `<unk>` (harvardnlp files) or `UNK` (TFDS, which
# rewrites train/validation); both mean the vocabulary's unknown entry.
UNK_ALIASES = frozenset({"<unk>", "UNK", "unk", "<UNK>"})

# Words that the data keeps with their period (`corp.`, `sept.`, `calif.`), also
# at the very end of a text, where PTB adds the sentence period: `co. .`.
_ABBREVIATIONS = (
    "adm alex ave bancorp bhd bros capt cie co col colo conn corp cos cpl dept "
    "dr est feb gen gov govt inc intl jan jr lt ltd md messrs mich minn mr mrs "
    "ms mt okla pa plc pres prof pvt rep reps rev sen sens sept sgt spc sr st "
    "ste tenn univ va vs aug oct nov dec calif ariz fla ga kan ky nev wis ala "
    "ark del ft neb"
).split()
# Abbreviations that are also words: kept only in the middle of a text
# (`no. #`, `mass.`); at its end they are words followed by the final period.
_MID_ABBREVIATIONS = "no nos mass miss ill ore mar wash ind pct apr".split()

# Control characters are removed first, so these markers cannot occur in text.
_MARK = "\x01"  # period of an abbreviation
_AMP = "\x02"  # `&`, escaped as `&amp;` after `;` is split off


def _alternation(words: Sequence[str]) -> str:
    # Longest first so that RE2's leftmost-first alternation prefers `sens`
    # over `sen`.
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


_ABBR = _alternation(_ABBREVIATIONS)
_ABBR_MID = _alternation(_ABBREVIATIONS + _MID_ABBREVIATIONS)

NORMALIZATIONS = NORMALIZATION_CHOICES


# The tokenization rules, as (pattern, rewrite) pairs applied in order to the
# text in its own case and digits; `fold` then lowercases each token and masks
# its digits. One pass serves the model's tokens and the readable headline's
# source words, which so align one to one. (Numbers keep `,` and `:` inside:
# `2,500`, `#,###`, `3:30`.)
_NUM = r"#\p{Nd}"
_RULES: tuple[tuple[str, str], ...] = (
    # Typographic punctuation -> the ASCII forms the data uses.
    ("[\u201c\u201e\u00ab\u201f]", " `` "),
    ("[\u201d\u00bb]", " '' "),
    ("[\u2018\u2019\u201a\u201b\u2032]", "'"),
    ("[\u2014\u2015]", " -- "),
    ("[\u2010\u2011\u2012\u2013\u2212]", "-"),
    # HTML entities: unescape so that `&` is escaped exactly once below.
    ("&quot;", '"'),
    ("&(?:#39|apos);", "'"),
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&amp;", "&"),
    # PTB escapes (`&` -> `&amp;` comes last, after `;` is split off).
    ("&", _AMP),
    (r"\\?/", r"\\/"),
    (r"\(", " -lrb- "),
    (r"\)", " -rrb- "),
    (r"\[", " -lsb- "),
    (r"\]", " -rsb- "),
    (r"\{", " -lcb- "),
    (r"\}", " -rcb- "),
    # Double quotes: opening `` after a space or at the start, closing '' else.
    (r'(^|\s)"', r"\1 `` "),
    ('"', " '' "),
    # Ellipsis -> marker (restored at the end) so the period rules skip it.
    ("\\.\\.\\.+|\u2026", " \u2026 "),
    (r"-{2,}", " -- "),
    # Contractions and possessives: `can't` -> `ca n't`, `NEC's` -> `NEC 's`.
    (r"(?i)\b(can)(not)\b", r"\1 \2"),
    (r"(?i)([a-z])(n't)\b", r"\1 \2"),
    (r"(?i)([^\s'])'(s|re|ve|ll|d|m)\b", r"\1 '\2"),
    (r"([^\s'])'(\s|$)", r"\1 '\2"),  # `drivers' union`, closing quote
    # Punctuation split off, except inside numbers.
    (r"([?!;%])", r" \1 "),
    (r"\$", "$ "),
    (f"(^|[^{_NUM}]),", r"\1 , "),
    (f",([^{_NUM}]|$)", r" , \1"),
    (f"(^|[^{_NUM}]):", r"\1 : "),
    (f":([^{_NUM}]|$)", r" : \1"),
    (r"\s+", " "),
    # Periods. Abbreviations (`Corp.`, `U.S.`, initials `W.`) keep theirs:
    # mark it, split every other word-final period, then restore the mark.
    (r"\s$", ""),
    (r"(?i)\b(" + _ABBR_MID + r"|[a-z](?:\.[a-z])*)\.(\s)", r"\1" + _MARK + r"\2"),
    (r"(?i)\b(" + _ABBR + r"|[a-z](?:\.[a-z])+)\.$", r"\1" + _MARK + " ."),
    (r"\.(\s|$)", r" .\1"),
    (_MARK, "."),
    (_AMP, "&amp;"),
    ("\u2026", "..."),
)


def _prepare(texts, max_chars: int) -> tf.Tensor:
    """Valid UTF-8 cut to `max_chars`, control characters removed, `<unk>`."""
    if max_chars < 1:
        raise ValueError(f"`max_chars` must be >= 1. Received: max_chars={max_chars}")
    x = tf.convert_to_tensor(texts, dtype=tf.string)
    # Bound the work first (4 bytes per character at most), then make the text
    # valid UTF-8 (a character cut by the byte limit becomes U+FFFD, which the
    # character limit then drops) and cut it at a character boundary.
    x = tf.strings.substr(x, 0, 4 * max_chars, unit="BYTE")
    x = tf.strings.unicode_transcode(
        x, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    x = tf.strings.substr(x, 0, max_chars, unit="UTF8_CHAR")
    # Format characters (soft hyphen, zero-width space) vanish; control,
    # private-use, separator and replacement characters become spaces.
    x = tf.strings.regex_replace(x, r"\p{Cf}+", "")
    x = tf.strings.regex_replace(x, "[\\p{Cc}\\p{Co}\\p{Cs}\\p{Z}\ufffd]+", " ")
    return tf.strings.regex_replace(x, r"\bUNK\b", UNK)


def _apply(x, rules) -> tf.Tensor:
    for pattern, rewrite in rules:
        x = tf.strings.regex_replace(x, pattern, rewrite)
    return tf.strings.strip(tf.strings.regex_replace(x, r"\s+", " "))


def check_normalization(normalization):
    """Raises `ValueError` unless `normalization` is one of `NORMALIZATIONS`."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"`normalization` must be one of {NORMALIZATIONS}. "
            f"Received: normalization={normalization!r}"
        )


def normalize(
    texts, max_chars: int = 4096, normalization: str = "gigaword"
) -> tf.Tensor:
    """Normalizes raw text into the Gigaword token form, in-graph.

    PTB-tokenizes (`'s`, `n't`, commas, quotes as ``` `` ``` / `''`, brackets
    as `-lrb-` / `-rrb-`, sentence-final periods, but keeps abbreviations such
    as `corp.` and `u.s.`), escapes `&` and `/` as the data does, removes
    control characters and collapses whitespace (`surface`); then lowercases
    (Unicode-aware) and replaces digits by `#` (`"gigaword"` only: the
    `"general"` form keeps them) (`fold`). A standalone `UNK` becomes
    `<unk>`. Text that is already in the data's form comes back unchanged.

    Example:

    >>> normalize("Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.")
    <tf.Tensor: ... b"japan 's nec corp. said on wednesday it would cut #,### jobs .">

    Args:
        texts: `tf.string` tensor (or str / list of str) of any shape.
        max_chars: texts are cut to their first `max_chars` Unicode characters
            before any regex runs, so the cost per text is bounded.
        normalization: `"gigaword"` or `"general"` (digits kept).

    Returns:
        `tf.string` tensor of the same shape, tokens separated by one space.
    """
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    tokens = tokenize(texts, max_chars=max_chars, normalization=normalization)
    joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
    if isinstance(joined, tf.RaggedTensor):  # texts of rank 2 or more
        joined = joined.to_tensor(shape=tf.shape(texts))
    return joined


def tokenize(
    texts,
    max_tokens: int | None = None,
    max_chars: int = 4096,
    normalization: str = "gigaword",
):
    """Normalizes texts and splits them into word tokens, in-graph.

    `fold(surface_words(texts))`: the i-th token is the i-th surface word,
    folded.

    Args:
        texts: `tf.string` tensor of shape `(batch,)` (or a scalar).
        max_tokens: keep at most this many tokens per text (`None`: all).
        max_chars: passed to `surface`.
        normalization: passed to `fold`.

    Returns:
        `tf.RaggedTensor` of shape `(batch, None)` of `tf.string` tokens, or a
        1-D `tf.string` tensor for a scalar input.
    """
    check_normalization(normalization)
    return fold(surface_words(texts, max_tokens, max_chars), normalization)


def fold(tokens, normalization: str = "gigaword"):
    """Surface tokens to normalized ones: lowercased, digits `#` (gigaword).

    `tokens`: a `tf.string` tensor or `tf.RaggedTensor`, of the same kind out.
    """
    check_normalization(normalization)
    if isinstance(tokens, tf.RaggedTensor):
        return tf.ragged.map_flat_values(fold, tokens, normalization)
    tokens = tf.strings.lower(tokens, encoding="utf-8")
    if normalization == "gigaword":
        tokens = tf.strings.regex_replace(tokens, r"\p{Nd}", "#")
    return tokens


def surface(texts, max_chars: int = 4096) -> tf.Tensor:
    """The tokenized text in its own case and digits, in-graph.

    `Japan 's NEC Corp. said ... 2,500 jobs .`: `normalize` before `fold`.
    """
    return _apply(_prepare(texts, max_chars), _RULES)


def surface_words(texts, max_tokens: int | None = None, max_chars: int = 4096):
    """`surface(texts)` split into words, `tokenize`'s shapes.

    What a readable headline writes for a word it takes from the source
    (`NEC`, `2,500`, `IPv4`): the i-th surface word folds to the i-th token.
    """
    if max_tokens is not None and max_tokens < 0:
        raise ValueError(
            f"`max_tokens` must be >= 0 or None. Received: max_tokens={max_tokens}"
        )
    words = tf.strings.split(surface(texts, max_chars))
    if max_tokens is not None:
        words = words[..., :max_tokens]
    return words


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
_DETOKENIZE: tuple[tuple[str, str], ...] = (
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
# Leading punctuation, the first character, the rest.
_FIRST = r"(?s)^([\p{P}\p{S}\s]*)(.?)(.*)$"


def detokenize(tokens) -> tf.Tensor:
    r"""PTB tokens to written text, first letter capitalized, in-graph.

    `japan 's nec cuts 2,500 jobs -lrb- 12 % -rrb-` becomes
    `Japan's nec cuts 2,500 jobs (12%)`: brackets and the `&amp;`, `\/`
    escapes restored, ``` `` ``` / `''` as typographic quotes, `--` as a dash,
    punctuation, `'s` and `n't` joined to the word before, `$` and opening
    brackets to the word after; a period after an abbreviation's is dropped.

    Args:
        tokens: `tf.string` `[batch, T]`, "" for no token, or a ragged
            `[batch, None]`.

    Returns:
        `tf.string` `[batch]`.
    """
    if not isinstance(tokens, tf.RaggedTensor):
        tokens = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(tokens, tf.string))
    tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(tokens, ""))
    words = tokens.flat_values
    for pattern, rewrite in _DETOKENIZE:
        words = tf.strings.regex_replace(words, pattern, rewrite)
    first = tf.equal(tf.ragged.range(tokens.row_lengths()).flat_values, 0)
    previous = tf.concat([[""], words[:-1]], axis=0)
    glued = tf.logical_or(
        tf.strings.regex_full_match(words, _CLOSES),
        tf.strings.regex_full_match(previous, _OPENS),
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


def guess_normalization(texts: Iterable[str]) -> str:
    """`"gigaword"` for text already in Gigaword's form, else `"general"`.

    Gigaword's text has no digit (they are `#`) and no capital letter but in
    its `UNK` markers: any other digit or capital means text of another kind.
    """
    for line in texts:
        line = line.replace("UNK", "")
        if any(c.isdigit() or c.isupper() for c in line):
            return "general"
    return "gigaword"


def _count_tokens(source) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    if isinstance(source, tf.data.Dataset):
        source = source.as_numpy_iterator()
    for item in source:
        if isinstance(item, (tf.Tensor, tf.RaggedTensor)):
            item = item.numpy()
        if hasattr(item, "to_list"):  # RaggedTensorValue
            item = item.to_list()
        if isinstance(item, (str, bytes)):
            item = [item]
        stack = [item]
        while stack:  # flatten nested lists / arrays of tokens
            cur = stack.pop()
            if isinstance(cur, bytes):
                counts[cur.decode("utf-8")] += 1
            elif isinstance(cur, str):
                counts[cur] += 1
            else:
                stack.extend(list(cur))
    return counts


def build_vocabulary(
    tokens_or_counts: Mapping[str, int] | Iterable | tf.data.Dataset,
    max_size: int | None = None,
    min_count: int = 1,
    reserved: Sequence[str] = RESERVED,
) -> list[str]:
    """Builds a word list, most frequent first, after the reserved entries.

    Gigaword's unknown-word tokens (`UNK`, `<unk>`) are not words of their own:
    they are counted as the reserved unknown entry (`reserved[1]`, `"<unk>"`).

    Args:
        tokens_or_counts: a mapping `{word: count}`, or an iterable / a
            `tf.data.Dataset` whose elements are tokens or (nested, ragged)
            sequences of tokens, as `str`, `bytes` or `tf.string` tensors
            (e.g. `dataset.map(lambda d, s: tokenize(d))`).
        max_size: size of the whole vocabulary, reserved entries included
            (`None`: no limit).
        min_count: drop words seen fewer times.
        reserved: entries placed first, in order; the second is the unknown
            token.

    Returns:
        List of unique strings: `reserved` followed by words by decreasing
        count (ties in alphabetical order, so the result is deterministic).
    """
    reserved = list(reserved)
    if len(set(reserved)) != len(reserved):
        raise ValueError(f"`reserved` must not repeat a token. Received: {reserved}")
    if max_size is not None and max_size < len(reserved):
        raise ValueError(
            f"`max_size` must be >= len(reserved)={len(reserved)}. "
            f"Received: max_size={max_size}"
        )
    if min_count < 1:
        raise ValueError(f"`min_count` must be >= 1. Received: min_count={min_count}")
    if isinstance(tokens_or_counts, Mapping):
        counts = collections.Counter(
            {
                (k.decode("utf-8") if isinstance(k, bytes) else k): int(v)
                for k, v in tokens_or_counts.items()
            }
        )
    else:
        counts = _count_tokens(tokens_or_counts)
    skip = set(reserved) | UNK_ALIASES
    words = sorted(
        (w for w, c in counts.items() if c >= min_count and w not in skip and w),
        key=lambda w: (-counts[w], w),
    )
    vocab = reserved + words
    return vocab if max_size is None else vocab[:max_size]
