"""Choosing the decoding settings on validation data.

Beam search's length penalty and n-gram blocking change ROUGE by a point or
more, and their best values depend on the trained model and on the data's
headline style. `tune_search_options` decodes a validation sample under each
setting of a small grid and keeps the best by mean ROUGE-1 F1;
`tune_greedy_end_penalty` does the same for greedy search's one length
lever, the end token's penalty. The test split is never looked at.

Each row also keeps ROUGE-2 and ROUGE-L (`models.decoding.lead_check` holds the
chosen row against the lead baseline) and flags a setting whose headlines
average within a tenth of the search's `max_length` (`at_max_length`): a
model that loops, or a limit that cuts its headlines, which the printed
table then says in a line of its own.
"""

import dataclasses

import numpy as np

from models.decoding.headline_module import headline_search
from models.scoring.metrics import mean_rouge


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
        `length_penalty`, `no_repeat_ngram_size`, `rouge1`, `rouge2`,
        `rougeL`, `mean_length` and `at_max_length`.
    """
    if not documents:
        raise ValueError("`documents` must not be empty. Received: documents=[]")
    rows = []
    for ngram_size in ngram_sizes:
        options = dataclasses.replace(base, no_repeat_ngram_size=int(ngram_size))
        # One trace per n-gram size, not per setting.
        search = headline_search(model, features, options, options.beam_size)
        for alpha in length_penalties:
            headlines = search(documents, length_penalty=alpha)
            rows.append(
                _scored(
                    headlines,
                    references,
                    options.max_length,
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


def tune_greedy_end_penalty(
    model, features, documents, references, base, penalties, target_length=None
):
    """The best `greedy_end_penalty` on `documents`, and every result.

    Greedy search keeps `base`'s other settings (its n-gram blocking and
    minimum length: tune those first). The best is the one of the highest
    ROUGE-1 or, with `target_length`, the one whose headlines' mean length
    is nearest it (ties to the higher ROUGE-1): a distilled student keeps
    its teacher's length, which the validation references need not share
    with the data it will serve.

    Args:
        model, features, documents, references: as `tune_search_options`.
        base: `SearchOptions` whose other fields are kept.
        penalties: values of `greedy_end_penalty` to try.
        target_length: None, or the mean length in tokens to come nearest.

    Returns:
        `(best, rows)`: the chosen `SearchOptions`; one dict per value with
        `greedy_end_penalty` and the scores of `tune_search_options`' rows.
    """
    if not documents:
        raise ValueError("`documents` must not be empty. Received: documents=[]")
    if not penalties:
        raise ValueError(
            f"`penalties` must not be empty. Received: penalties={penalties!r}"
        )
    rows = []
    search = headline_search(model, features, base, 1)  # one trace for the grid
    for penalty in penalties:
        headlines = search(documents, end_penalty=penalty)
        rows.append(
            _scored(
                headlines,
                references,
                base.max_length,
                greedy_end_penalty=float(penalty),
            )
        )
    if target_length is None:
        best = max(rows, key=lambda r: r["rouge1"])
    else:
        best = min(
            rows, key=lambda r: (abs(r["mean_length"] - target_length), -r["rouge1"])
        )
    chosen = dataclasses.replace(base, greedy_end_penalty=best["greedy_end_penalty"])
    return chosen, rows


# A mean length at least this share of `max_length` sits at the maximum.
AT_MAX_LENGTH = 0.9
# The settings that name a row of each grid.
BEAM_KEYS = ["length_penalty", "no_repeat_ngram_size"]
GREEDY_KEYS = ["greedy_end_penalty"]


def _scored(headlines, references, max_length, **settings):
    """One grid row: the settings, then the headlines' ROUGE and length."""
    # The normalized headlines' tokens are space-separated, a Chinese or
    # Japanese character each: the tokenizer's units.
    mean_length = float(np.mean([len(h.split()) for h in headlines]))
    return {
        **settings,
        **mean_rouge(headlines, references, ["rouge1", "rouge2", "rougeL"]),
        "mean_length": mean_length,
        "at_max_length": mean_length >= AT_MAX_LENGTH * max_length,
    }


def chosen_row(rows, chosen, keys):
    """The row of `rows` whose `keys` hold `chosen`'s values."""
    return next(r for r in rows if all(r[k] == getattr(chosen, k) for k in keys))


def served_row(rows, greedy_rows, chosen):
    """The row of the search an export of `chosen` serves by default: the
    beam's (`tune_search_options`' `rows`), or greedy search's
    (`tune_greedy_end_penalty`'s `greedy_rows`, if tuned) when the beam is 1.
    """
    if chosen.beam_size < 2 and greedy_rows:
        return chosen_row(greedy_rows, chosen, GREEDY_KEYS)
    return chosen_row(rows, chosen, BEAM_KEYS)


def at_max_length_note(row, max_length):
    """The line the tuning printout adds when the chosen `row` sits at the
    maximum length, else None."""
    if not row.get("at_max_length"):
        return None
    return (
        f"note: the chosen setting's headlines average {row['mean_length']:.1f} "
        f"tokens, at the maximum length ({max_length}): the model may repeat "
        "itself, or the limit cuts its headlines"
    )


def format_greedy_rows(rows, chosen):
    """A text table of the greedy grid, the chosen row marked."""
    return _table(rows, chosen, GREEDY_KEYS)


def format_rows(rows, chosen):
    """A text table of the grid, the chosen row marked."""
    return _table(rows, chosen, BEAM_KEYS)


def _table(rows, chosen, keys):
    """`rows` under a header of `keys` (each column as wide as its name),
    ROUGE-1 and mean length; the row of `chosen`'s values marked, and a
    line after the table if it sits at the maximum length."""
    lines = ["  ".join(keys) + "  ROUGE-1  mean length"]
    for r in rows:
        marked = all(r[k] == getattr(chosen, k) for k in keys)
        cells = [
            f"{r[k]:>{len(k)}{'d' if isinstance(r[k], int) else '.2f'}}" for k in keys
        ]
        lines.append(
            "  ".join(cells)
            + f"  {r['rouge1']:7.2f}  {r['mean_length']:11.2f}"
            + ("  <- chosen" if marked else "")
        )
    note = at_max_length_note(chosen_row(rows, chosen, keys), chosen.max_length)
    return "\n".join(lines + ([note] if note else []))
