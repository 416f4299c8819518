"""ROUGE, the one place it is computed: validation, tuning and evaluation.

Every score comes from rouge-score's `RougeScorer`, F1 of each headline
against its reference, on the tokens of `RougeTokenizer`: rouge-score's own
(with the Porter stemmer) on ASCII text, and the words of every script on
other text. numpy, rouge-score and regex only (no TensorFlow), imported
lazily so that command lines answer `--help` fast.
"""

import functools
import unicodedata

import numpy as np

from models.text.cjk import CJK_CHARACTERS

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# What `metrics.json` says the scores were tokenized with.
ROUGE_TOKENIZER = (
    "models.scoring.metrics.RougeTokenizer: rouge-score's default (Porter stemmer) on "
    "ASCII text; elsewhere NFKC, lowercased letters, marks and digits of every "
    "script, ASCII words stemmed, a token per Han, Hiragana or Katakana character"
)


class RougeTokenizer:
    """ROUGE's tokens of a text in any script, for `RougeScorer(tokenizer=)`.

    ASCII text gets exactly rouge-score's default tokens: lowercased, runs of
    `[a-z0-9]`, Porter stems of those longer than 3 characters. Other text is
    put in NFKC form (`café` written with a combining accent is `café`,
    fullwidth `２０２４` is `2024`) and lowercased; its tokens are the runs of
    letters, combining marks and digits of any script (`москва`, `zürich`),
    and each Han, Hiragana or Katakana letter alone (`東京` is `東`, `京`),
    the Chinese and Japanese headlines' usual unit. Punctuation and symbols
    are dropped, and only ASCII words are stemmed (Porter's rules are
    English).

    Example:

    >>> RougeTokenizer().tokenize("Café à Zürich: 東京株式 rallies")
    ['café', 'à', 'zürich', '東', '京', '株', '式', 'ralli']
    """

    def __init__(self):
        from rouge_score import tokenizers

        self._default = tokenizers.DefaultTokenizer(use_stemmer=True)

    def tokenize(self, text):
        """The list of tokens of `text`, a string."""
        if text.isascii():
            return self._default.tokenize(text)
        text = unicodedata.normalize("NFKC", text).lower()
        tokens = []
        for word in _token_pattern().findall(text):
            if word.isascii():
                # rouge-score's own rule and stemmer, on the one word.
                tokens += self._default.tokenize(word)
            elif _has_word_character(word):
                tokens.append(word)
        return tokens


@functools.cache
def _token_pattern():
    import regex

    word = f"(?:(?![{CJK_CHARACTERS}])[\\p{{L}}\\p{{M}}\\p{{N}}])+"
    return regex.compile(f"[{CJK_CHARACTERS}]|{word}")


def _has_word_character(token):
    # The CJK symbols (`。`, `「`) are single-character matches to drop.
    return any(unicodedata.category(c)[0] in "LN" for c in token)


def rouge_scores(
    predictions,
    references,
    rouge_types=ROUGE_TYPES,
):
    """Per-example ROUGE F1 in `[0, 1]`, shape `[N, len(rouge_types)]`.

    Raises:
        ValueError: if the two sequences differ in length or are empty.
    """
    from rouge_score import rouge_scorer

    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(
            "`predictions` and `references` must have the same length. Received: "
            f"{len(predictions)} predictions and {len(references)} references"
        )
    if not predictions:
        raise ValueError(
            "`predictions` must hold at least one headline. Received: none"
        )
    scorer = rouge_scorer.RougeScorer(
        list(rouge_types), use_stemmer=True, tokenizer=RougeTokenizer()
    )
    scores = np.empty((len(predictions), len(rouge_types)), dtype=np.float64)
    for i, (prediction, reference) in enumerate(
        zip(predictions, references, strict=True)
    ):
        # rougeLsum splits sentences on "\n"; a headline is a single sentence.
        result = scorer.score(reference.strip(), prediction.strip())
        scores[i] = [result[name].fmeasure for name in rouge_types]
    return scores


def mean_rouge(
    predictions,
    references,
    rouge_types=ROUGE_TYPES,
):
    """Mean ROUGE F1 x 100 of each type: `{rouge_type: value}`."""
    means = rouge_scores(predictions, references, rouge_types).mean(axis=0)
    return {name: 100 * float(m) for name, m in zip(rouge_types, means, strict=True)}


def rouge_with_intervals(
    predictions,
    references,
    *,
    n_bootstrap=1000,
    seed=0,
    confidence=0.95,
):
    """Mean ROUGE F1 with percentile-bootstrap confidence intervals.

    The same `n_bootstrap` resamples of the examples are used for all of
    `ROUGE_TYPES`.

    Args:
        predictions: `N` predicted headlines.
        references: `N` reference headlines.
        n_bootstrap: number of bootstrap resamples.
        seed: seed of the resampling, for reproducible intervals.
        confidence: coverage of the interval (0.95 gives the 2.5 and 97.5
            percentiles).

    Returns:
        `{metric: {"f1": mean, "low": low, "high": high}}`, all times 100.
    """
    if n_bootstrap < 1:
        raise ValueError(
            f"`n_bootstrap` must be >= 1. Received: n_bootstrap={n_bootstrap}"
        )
    scores = rouge_scores(predictions, references)  # [N, M]
    n = scores.shape[0]
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(n_bootstrap, n))  # [B, N], shared by metrics
    # Column by column to keep memory at `[B, N]` rather than `[B, N, M]`.
    boot = np.stack(
        [scores[:, j][index].mean(axis=1) for j in range(scores.shape[1])], axis=1
    )  # [B, M]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(boot, [100 * alpha, 100 * (1 - alpha)], axis=0)
    mean = scores.mean(axis=0)
    return {
        name: {
            "f1": round(100 * float(mean[j]), 4),
            "low": round(100 * float(low[j]), 4),
            "high": round(100 * float(high[j]), 4),
        }
        for j, name in enumerate(ROUGE_TYPES)
    }
