"""The lead baseline: a headline made of the document's first words.

The score any model must beat; `models.evaluate` reports it beside each
decoder. Plain Python: the documents are already in the data's normalized
form, like the references, so the baseline needs no further processing.
"""

from models import cjk

LEAD_WORDS = 8


def lead_baseline(documents, n_words=LEAD_WORDS):
    """Lead baseline: the first `n_words` words of each document.

    Words are whitespace-separated, and each Chinese or Japanese character
    is one (`models.cjk.lead`).

    Args:
        documents: The documents, `str`.
        n_words: Words kept, at least 1.

    Returns:
        One headline per document, its words joined by single spaces.
    """
    if n_words < 1:
        raise ValueError(f"`n_words` must be >= 1. Received: n_words={n_words}")
    return [cjk.lead(document, n_words) for document in documents]
