"""Chinese and Japanese text: written without spaces, read one character a token.

Chinese and Japanese put no space between words, and finding the words takes
a dictionary; one token per character needs none, and is how their headlines
are scored (LCSTS's ROUGE, for one). Latin words and numbers written among
the characters stay whole (`500`, `B.C.`). Korean writes spaces between its
words, so Hangul is read word by word like any other script.

The character classes below are written so that both regex engines the
summarizer uses read them the same: RE2 in the graph
(`models.text.tokenizing`) and Python's `regex` outside it (ROUGE in
`models.scoring.metrics`). Both read `\\p{Han}` as the Unicode script; the other
characters are literal. Plain Python, no TensorFlow.
"""

import functools

# The letters, one token each: the Han, Hiragana and Katakana scripts, and
# the prolonged sound marks and halfwidth voiced marks, whose script is
# Common (`ー` in `データ`).
CJK_LETTERS = r"\p{Han}\p{Hiragana}\p{Katakana}" + "\u30fc\uff70\uff9e\uff9f"
# Their punctuation and symbols, one token each as well: the CJK Symbols and
# Punctuation block (`。`, `、`, `「」`, `『』`, `〜`, and the marks `々`, `〆`),
# the katakana middle dot `・`, and the fullwidth and halfwidth forms other
# than letters and digits (`！`, `？`, `（）`, `：`, `；`, `，`, `｢｣`).
CJK_SYMBOLS = "\u3001-\u303f\u30fb\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
# Everything read one character a token, for inside a `[...]` class.
CJK_CHARACTERS = CJK_LETTERS + CJK_SYMBOLS


def lead(text, n_words):
    """The text's first `n_words` words, separated by single spaces.

    A word is what whitespace separates (`str.split`), or a character of
    `CJK_CHARACTERS`, which stays written against its neighbours:
    `lead("Tokyo 東京株式市場", 3)` is `"Tokyo 東京"`.

    Args:
        text: a string.
        n_words: the number of words kept, `>= 0`.

    Returns:
        The string; `" ".join(text.split()[:n_words])` for a text without
        Chinese or Japanese characters.
    """
    if n_words < 0:
        raise ValueError(f"`n_words` must be >= 0. Received: n_words={n_words}")
    kept = []
    for chunk in text.split():
        if n_words == 0:
            break
        pieces = _piece_pattern().findall(chunk)[:n_words]
        n_words -= len(pieces)
        kept.append("".join(pieces))
    return " ".join(kept)


def word_count(text):
    """The number of words of `text`, as `lead` counts them.

    `word_count("Tokyo 東京株式市場")` is 7: `Tokyo` and six characters.
    """
    return sum(len(_piece_pattern().findall(chunk)) for chunk in text.split())


@functools.cache
def _piece_pattern():
    # A CJK character, or a run of other characters (whitespace aside).
    import regex

    return regex.compile(f"[{CJK_CHARACTERS}]|[^{CJK_CHARACTERS}]+")
