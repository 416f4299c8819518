"""PTB tokenization of raw text, in-graph, in the text's own case and digits.

The Gigaword pairs (Rush et al., 2015) are PTB-tokenized (`'s`, `n't`, commas,
quotes as ``` `` ``` / `''`, brackets as `-lrb-` / `-rrb-`, sentence-final
periods, abbreviations such as `corp.` kept). `surface` writes raw text in that
token form with stock TensorFlow string ops only (`tf.strings.*`, RE2
`regex_replace`): no `tensorflow-text`, no `py_function`, so a SavedModel that
calls it runs on stock TF Serving. RE2 has no look-around, so the rules below
use capture groups and a private marker character instead.
Chinese and Japanese, written without spaces, are split one character a token
(their punctuation too: `。`, `「`), Latin words and numbers among them kept
whole (`models.text.cjk`).
`models.text.normalization` then folds the tokens (lowercase, digits masked).
"""

import tensorflow as tf

from models.text.cjk import CJK_CHARACTERS
from models.text.vocabulary import UNK

# Texts are cut to this many Unicode characters before tokenizing, unless a
# caller says otherwise: a bound on the regexes' work per document.
MAX_CHARS = 4096

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


def _alternation(words):
    # Longest first so that RE2's leftmost-first alternation prefers `sens`
    # over `sen`.
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


_ABBR = _alternation(_ABBREVIATIONS)
_ABBR_MID = _alternation(_ABBREVIATIONS + _MID_ABBREVIATIONS)


# The tokenization rules, as (pattern, rewrite) pairs applied in order to the
# text in its own case and digits; `fold` then lowercases each token and masks
# its digits. One pass serves the model's tokens and the readable headline's
# source words, which so align one to one. (Numbers keep `,` and `:` inside:
# `2,500`, `#,###`, `3:30`.)
_NUM = r"#\p{Nd}"
_RULES = (
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
    # Chinese and Japanese: a token per character. After the quotes, which
    # so open after a space and close after a character (`"東京"`), and
    # before the periods, which so see the space after `B.C.` in `B.C.から`.
    (f"([{CJK_CHARACTERS}])", r" \1 "),
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


# Before the rules: format characters (soft hyphen, zero-width space)
# vanish; control, private-use, separator and replacement characters become
# spaces; Gigaword's `UNK` is the vocabulary's `<unk>`.
_PREPARE = (
    (r"\p{Cf}+", ""),
    ("[\\p{Cc}\\p{Co}\\p{Cs}\\p{Z}\ufffd]+", " "),
    (r"\bUNK\b", UNK),
)
# The regexes (RE2) of `surface`, in order, by stage: what an ids-level
# export writes down for a client outside TensorFlow
# (`models.export.text_contract`).
PATTERNS = {"prepare": _PREPARE, "rules": _RULES}


def _prepare(texts, max_chars):
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
    for pattern, rewrite in _PREPARE:
        x = tf.strings.regex_replace(x, pattern, rewrite)
    return x


def _apply(x, rules):
    for pattern, rewrite in rules:
        x = tf.strings.regex_replace(x, pattern, rewrite)
    return tf.strings.strip(tf.strings.regex_replace(x, r"\s+", " "))


def surface(texts, max_chars=MAX_CHARS):
    """The tokenized text in its own case and digits, in-graph.

    `Japan 's NEC Corp. said ... 2,500 jobs .`: `normalize` before `fold`.
    """
    return _apply(_prepare(texts, max_chars), _RULES)


def surface_words(texts, max_tokens=None, max_chars=MAX_CHARS):
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
