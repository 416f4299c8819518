"""Choosing the decoding settings on validation data.

Beam search's length penalty and n-gram blocking change ROUGE by a point or
more, and their best values depend on the trained model and on the data's
headline style. `tune_search_options` decodes a validation sample under each
setting of a small grid and keeps the best by mean ROUGE-1 F1;
`tune_greedy_end_penalty` does the same for greedy search's one length
lever, the end token's penalty. The test split is never looked at.
"""

import dataclasses
import functools

import numpy as np
import tensorflow as tf

from models.inference import HeadlineModule
from models.metrics import mean_rouge
from models.saved_model_client import headlines_in_batches


def tune_search_options(
    model, features, documents, references, base, length_penalties, ngram_sizes
):
    """The grid's best `SearchOptions` on `documents`, and every result.

    Args:
        model, features: the trained `HeadlineSummarizer` and its features.
        documents: validation documents (str or bytes).
        references: their reference headlines.
        base: `SearchOptions` whose other fields are kept.
        length_penalties: values of `length_penalty` to try.
        ngram_sizes: values of `no_repeat_ngram_size` to try (0: none).

    Returns:
        `(best, rows)`: the chosen `SearchOptions`; one dict per setting with
        `length_penalty`, `no_repeat_ngram_size`, `rouge1` and `mean_length`.
    """
    if not documents:
        raise ValueError("`documents` must not be empty. Received: documents=[]")
    rows = []
    for ngram_size in ngram_sizes:
        options = dataclasses.replace(base, no_repeat_ngram_size=int(ngram_size))
        module = HeadlineModule(model, features, options)
        # The penalty is a tensor: one trace per n-gram size, not per setting.
        search = tf.function(
            lambda d, alpha, m=module, k=options.beam_size: m.search(
                d, k, length_penalty=alpha
            )["normalized_headlines"],
            autograph=False,
        )
        for alpha in length_penalties:
            headlines = headlines_in_batches(
                functools.partial(search, alpha=tf.constant(float(alpha))), documents
            )
            rows.append(
                _scored(
                    headlines,
                    references,
                    length_penalty=float(alpha),
                    no_repeat_ngram_size=int(ngram_size),
                )
            )
    best = max(rows, key=lambda r: r["rouge1"])
    chosen = dataclasses.replace(
        base,
        length_penalty=best["length_penalty"],
        no_repeat_ngram_size=best["no_repeat_ngram_size"],
    )
    return chosen, rows


def tune_greedy_end_penalty(model, features, documents, references, base, penalties):
    """The best `greedy_end_penalty` on `documents`, and every result.

    Greedy search keeps `base`'s other settings (its n-gram blocking and
    minimum length: tune those first).

    Args:
        model, features, documents, references: as `tune_search_options`.
        base: `SearchOptions` whose other fields are kept.
        penalties: values of `greedy_end_penalty` to try.

    Returns:
        `(best, rows)`: the chosen `SearchOptions`; one dict per value with
        `greedy_end_penalty`, `rouge1` and `mean_length`.
    """
    if not documents:
        raise ValueError("`documents` must not be empty. Received: documents=[]")
    if not penalties:
        raise ValueError(
            f"`penalties` must not be empty. Received: penalties={penalties!r}"
        )
    rows = []
    module = HeadlineModule(model, features, base)
    # The penalty is a tensor: one trace for the whole grid.
    search = tf.function(
        lambda d, penalty: module.search(d, 1, end_penalty=penalty)[
            "normalized_headlines"
        ],
        autograph=False,
    )
    for penalty in penalties:
        headlines = headlines_in_batches(
            functools.partial(search, penalty=tf.constant(float(penalty))), documents
        )
        rows.append(_scored(headlines, references, greedy_end_penalty=float(penalty)))
    best = max(rows, key=lambda r: r["rouge1"])
    chosen = dataclasses.replace(base, greedy_end_penalty=best["greedy_end_penalty"])
    return chosen, rows


def _scored(headlines, references, **settings):
    """One grid row: the settings, then the headlines' ROUGE-1 and length."""
    return {
        **settings,
        "rouge1": mean_rouge(headlines, references, ["rouge1"])["rouge1"],
        "mean_length": float(np.mean([len(h.split()) for h in headlines])),
    }


def format_greedy_rows(rows, chosen):
    """A text table of the greedy grid, the chosen row marked."""
    return _table(rows, chosen, ["greedy_end_penalty"])


def format_rows(rows, chosen):
    """A text table of the grid, the chosen row marked."""
    return _table(rows, chosen, ["length_penalty", "no_repeat_ngram_size"])


def _table(rows, chosen, keys):
    """`rows` under a header of `keys` (each column as wide as its name),
    ROUGE-1 and mean length; the row of `chosen`'s values marked."""
    lines = ["  ".join(keys) + "  ROUGE-1  mean length"]
    for r in rows:
        chosen_row = all(r[k] == getattr(chosen, k) for k in keys)
        cells = [
            f"{r[k]:>{len(k)}{'d' if isinstance(r[k], int) else '.2f'}}" for k in keys
        ]
        lines.append(
            "  ".join(cells)
            + f"  {r['rouge1']:7.2f}  {r['mean_length']:11.2f}"
            + ("  <- chosen" if chosen_row else "")
        )
    return "\n".join(lines)
