"""A run's config settled from its training data: the lengths and the text
form left unset (None) chosen once, when the run starts (`settle_config`).

A new run measures the first `SAMPLE_PAIRS` pairs of its training split in
the tokenizer's own units (words, one per Chinese or Japanese character;
`models.data.measure_lengths`) and, for each length left unset, takes
`length_limit`: the `PERCENTILE`th percentile of the lengths, plus a
quarter (`HEADROOM`), rounded up to a multiple of `MULTIPLE`, within
`SOURCE_BOUNDS` or `TARGET_BOUNDS`. A headline's length counts its `</s>`.
On the Gigaword sample (26,063 pairs) the percentiles are 50 source tokens
and 15 headline tokens, so the run keeps 64 and 20. The lead baseline's
words are the headlines' median (`models.scoring.baselines.choose_lead_tokens`):
8 on the Gigaword sample. An unset text form is `gigaword` for Gigaword's
own text and `general` for other data (`default_normalization`), and an
unset search limit the run's headline length.

The settled values go into the run's `config.json`, and the lead's words
and the measurements into `lengths.json` beside it; a resumed run keeps
them.
"""

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np

from models import data, text
from models.scoring.baselines import choose_lead_tokens
from models.settings.folder_layout import CONFIG_FILE, LENGTHS_FILE
from models.settings.json_files import write_json
from models.settings.model import SummarizerConfig

# Pairs measured: enough for a stable 99th percentile, few enough to take
# seconds on any training split.
SAMPLE_PAIRS = 20_000
PERCENTILE = 99
# Room above the percentile for the test data's and the users' longer texts.
HEADROOM = 1.25
MULTIPLE = 4
# Floors keep a short headline's data trainable; the ceilings are See et
# al. (2017)'s truncation of CNN/Daily Mail, 400 article and 100 summary
# tokens, which OpenNMT's summarization recipes keep.
SOURCE_BOUNDS = (16, 400)
TARGET_BOUNDS = (8, 100)
# The length fields that a run chooses from the data unless given.
LENGTH_FIELDS = ("max_source_length", "max_target_length")


def length_limit(lengths, bounds):
    """The length that `lengths` call for (the module's rule).

    Args:
        lengths: token lengths, at least one.
        bounds: `(floor, ceiling)` of the result.

    Returns:
        The `PERCENTILE`th percentile of `lengths` (a length that occurs)
        times `HEADROOM`, rounded up to a multiple of `MULTIPLE` and clipped
        to `bounds`.

    Example:

    >>> length_limit([10] * 980 + [50] * 15 + [78] * 5, (16, 400))
    64
    """
    lengths = np.asarray(lengths)
    if lengths.size == 0:
        raise ValueError("`lengths` must hold at least one length. Received: none")
    high = int(np.percentile(lengths, PERCENTILE, method="higher"))
    rounded = MULTIPLE * math.ceil(math.ceil(high * HEADROOM) / MULTIPLE)
    return int(min(max(rounded, bounds[0]), bounds[1]))


def _summary(lengths):
    return {
        "median": float(np.median(lengths)),
        "p95": int(np.percentile(lengths, 95, method="higher")),
        f"p{PERCENTILE}": int(np.percentile(lengths, PERCENTILE, method="higher")),
        "max": int(np.max(lengths)),
    }


def choose_lengths(source, target, reference, config):
    """The run's lengths record, from measured lengths.

    Args:
        source: the source token counts.
        target: the headline token counts, without `</s>`.
        reference: the headlines' words in the lead baseline's units.
        config: the `SummarizerConfig` whose lengths are kept unless unset
            (None), which are chosen from the data.

    Returns:
        A dict: `max_source_length`, `max_target_length` and `lead_tokens`,
        `chosen` (each length's origin: `"data"` or `"given"`), the rule,
        the number of pairs measured and their lengths' summaries.
    """
    target = np.asarray(target) + 1  # the `</s>` that each headline ends with
    measured = {
        "max_source_length": length_limit(source, SOURCE_BOUNDS),
        "max_target_length": length_limit(target, TARGET_BOUNDS),
    }
    given = {n: getattr(config, n) for n in LENGTH_FIELDS}
    return {
        **{n: measured[n] if given[n] is None else given[n] for n in LENGTH_FIELDS},
        "lead_tokens": choose_lead_tokens(reference),
        "chosen": {n: "data" if given[n] is None else "given" for n in LENGTH_FIELDS},
        "rule": (
            f"{PERCENTILE}th percentile x {HEADROOM}, rounded up to a multiple of "
            f"{MULTIPLE}, within {list(SOURCE_BOUNDS)} (source) and "
            f"{list(TARGET_BOUNDS)} (headline, </s> included); lead: the "
            "headlines' median"
        ),
        "pairs_measured": int(len(target)),
        "source_tokens": _summary(source),
        "target_tokens": _summary(target),
        "reference_words": _summary(reference),
    }


def default_normalization(source, train_split, sample=1000):
    """`gigaword` for Gigaword's own text, `general` for any other data.

    Args:
        source: the run's `DataSource`: TFDS's download of `gigaword` is
            Gigaword's own text; a local copy is read (`sample` pairs of
            `train_split`) to tell (`models.text.guess_normalization`).
        train_split: the training `(document, summary)` pairs.
        sample: the pairs read.
    """
    if source.dataset != "gigaword":
        return "general"
    if not source.data_dir:
        return "gigaword"
    pairs = train_split.take(sample).as_numpy_iterator()
    return text.guess_normalization(s.decode("utf-8") for p in pairs for s in p)


def settle_config(run_dir, train_split, source, config, search, init_from=None):
    """The config and search a run starts with, nothing left unset.

    The one place where a run's unset choices are resolved. A new run
    chooses `config`'s unset (None) `SETTLED_FROM_DATA` from `train_split`
    (`default_normalization`, then the lengths, measured on `SAMPLE_PAIRS`
    pairs at most) and writes `lengths.json`; a resumed run keeps its
    `config.json` and `lengths.json`; a run started `init_from` another
    keeps that run's config (its weights were trained on it). An unset
    `search.max_length` becomes the run's `max_target_length`. One line
    says where the lengths came from.

    Args:
        run_dir: the run folder.
        train_split: the training `(document, summary)` pairs.
        source: the run's `DataSource`.
        config: the `SummarizerConfig` of the command line.
        search: the `SearchOptions` of the command line.
        init_from: the run or export the run starts from, if any.

    Returns:
        `(config, search)`, settled (new records: the arguments stay as
        they were): what the run folder records.
    """
    run_dir = Path(run_dir)
    kept = run_dir / CONFIG_FILE if (run_dir / CONFIG_FILE).is_file() else None
    if kept is None and init_from is not None:
        kept = Path(init_from) / CONFIG_FILE
    if kept is not None:
        config = SummarizerConfig.load(kept)
    else:  # a copy, which the run completes (its vocabulary size)
        normalization = config.normalization or default_normalization(
            source, train_split
        )
        config = dataclasses.replace(config, normalization=normalization)
    config = _settle_lengths(run_dir, train_split, config, kept)
    if search.max_length is None:
        search = dataclasses.replace(search, max_length=config.max_target_length)
    return config, search


def _settle_lengths(run_dir, train_split, config, kept):
    """`config` with its lengths settled (`settle_config`); `kept`: the
    `config.json` it was read from, if any."""
    path = run_dir / LENGTHS_FILE
    if kept is not None and path.is_file():
        record = json.loads(path.read_text())
    else:
        measured = data.measure_lengths(train_split, config.normalization, SAMPLE_PAIRS)
        if not len(measured[0]):
            return config  # no training pairs: `prepare_run` says so
        record = choose_lengths(*measured, config)
        if kept is not None:
            record["chosen"] = dict.fromkeys(LENGTH_FIELDS, f"kept from {kept}")
        write_json(path, record)
        config = dataclasses.replace(config, **{n: record[n] for n in LENGTH_FIELDS})
    # The config a run trained with is the one authority on its lengths.
    record.update({n: getattr(config, n) for n in LENGTH_FIELDS})
    print(
        describe(record, kept is not None and kept.parent == run_dir), file=sys.stderr
    )
    return config


def describe(record, resumed=False):
    """The one line a run prints about its lengths."""
    origin = {"data": f"from the data's p{PERCENTILE}", "given": "given"}
    source, target = record["source_tokens"], record["target_tokens"]
    how = {
        name: origin.get(record["chosen"][name], "kept")
        for name in ("max_source_length", "max_target_length")
    }
    return (
        f"Lengths{' (kept from the run)' if resumed else ''}: source "
        f"{record['max_source_length']} tokens ({how['max_source_length']}; "
        f"p{PERCENTILE} {source[f'p{PERCENTILE}']}, max {source['max']}), headline "
        f"{record['max_target_length']} tokens with </s> "
        f"({how['max_target_length']}; p{PERCENTILE} {target[f'p{PERCENTILE}']}, "
        f"max {target['max']}), lead baseline {record['lead_tokens']} tokens "
        f"(median headline), over {record['pairs_measured']} training pairs"
    )
