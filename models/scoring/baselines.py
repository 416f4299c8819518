"""The lead baseline: a headline made of the document's first words.

The score any model must beat; `models.evaluation.evaluate` reports it
beside each decoder, and `models.decoding.lead_check` holds a trained model
against it on validation. The median length of the training headlines
(`choose_lead_tokens`), recorded with the run (`lengths.json`,
`models.training.chosen_lengths`), centres the Ns tried; the check keeps the
strongest on validation, and the export records it (`training.json`,
`chosen_lead_tokens`) so that the test split is scored against the same N.
Words are counted alike in every script: words where the text writes spaces,
characters in Chinese and Japanese. Plain Python: the documents are already
in the data's normalized form, like the references, so the baseline needs no
further processing.
"""

import json
import math
import statistics
from pathlib import Path

from models.settings.folder_layout import LENGTHS_FILE, TRAINING_RECORD_FILE
from models.text import cjk

# The lead baseline's words when no run recorded them (an export made before
# they were chosen from the data).
LEAD_WORDS = 8


def lead_baseline(documents, n_words=LEAD_WORDS):
    """Lead baseline: the first `n_words` words of each document.

    Words are whitespace-separated, and each Chinese or Japanese character
    is one (`models.text.cjk.lead`).

    Args:
        documents: The documents, `str`.
        n_words: Words kept, at least 1.

    Returns:
        One headline per document, its words joined by single spaces.
    """
    if n_words < 1:
        raise ValueError(f"`n_words` must be >= 1. Received: n_words={n_words}")
    return [cjk.lead(document, n_words) for document in documents]


def lead_name(n_words):
    """The baseline's name in `metrics.json` and the tables: `lead_<N>`."""
    return f"lead_{n_words}"


def choose_lead_tokens(reference_lengths):
    """The lead baseline's N: the median of `reference_lengths`, rounded.

    Halves round up, and N is at least 1. The lengths are the headlines'
    words as `models.text.cjk.word_count` counts them.

    Example:

    >>> choose_lead_tokens([7, 8, 8, 9])
    8
    >>> choose_lead_tokens([7, 8])
    8
    """
    lengths = list(reference_lengths)
    if not lengths:
        raise ValueError(
            "`reference_lengths` must hold at least one length. Received: none"
        )
    return max(1, math.floor(statistics.median(lengths) + 0.5))


def recorded_lead_tokens(folder):
    """The lead baseline's N recorded in `folder` (a run or an export), else
    `LEAD_WORDS`."""
    path = Path(folder) / LENGTHS_FILE
    if not path.is_file():
        return LEAD_WORDS
    return int(json.loads(path.read_text())["lead_tokens"])


def chosen_lead_tokens(folder):
    """The lead baseline's N chosen on validation, recorded in `folder`'s
    `training.json` (an export; `models.decoding.lead_check`), else
    `recorded_lead_tokens(folder)`."""
    path = Path(folder) / TRAINING_RECORD_FILE
    if path.is_file():
        check = json.loads(path.read_text()).get("validation_check") or {}
        if "lead_tokens" in check:
            return int(check["lead_tokens"])
    return recorded_lead_tokens(folder)
