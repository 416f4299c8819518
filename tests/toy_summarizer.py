"""A tiny `HeadlineSummarizer` and one batch for it, built in-process.

Shared by the summarizer's, the ensemble's and the decoding levers' tests
(tests/test_summarizer.py, tests/test_ensemble.py,
tests/test_decoding_levers.py). The batch has source padding and an
out-of-vocabulary word that the headline copies.
"""

import numpy as np

from models.model.summarizer import HeadlineSummarizer
from models.settings.model import SummarizerConfig

# Vocabulary size, source length and headline length.
VOCAB, S, T = 40, 7, 5


def tiny_config(**overrides):
    """A `SummarizerConfig` of a few units, without dropout or smoothing.

    Args:
        **overrides: `SummarizerConfig` fields to set instead.

    Returns:
        The `SummarizerConfig`.
    """
    values = dict(
        vocab_size=VOCAB,
        embedding_dim=8,
        hidden_size=12,
        attention_units=6,
        dropout=0.0,
        label_smoothing=0.0,  # the tests' losses are computed by hand without it
        max_source_length=S,
        max_target_length=T,
    )
    return SummarizerConfig(**{**values, **overrides})


def tiny_batch(seed=0):
    """Three made-up examples: `(inputs, target)`.

    Args:
        seed: seed of the random token ids.

    Returns:
        `inputs`, a dict of `source_ids` and `source_ext_ids` `(3, S)` and
        `target_in` `(3, T)` (int32), and `target` `(3, T)`: the headline
        ids. Row 1's source ends in padding; row 0's source holds an
        out-of-vocabulary word (extended id `VOCAB + 2`) at position 2,
        which its headline copies at step 1.
    """
    rng = np.random.default_rng(seed)
    source = rng.integers(4, VOCAB, (3, S)).astype("int32")
    source[1, 5:] = 0  # padding
    ext = source.copy()
    ext[0, 2] = VOCAB + 2  # an OOV word at position 2, copyable
    target = rng.integers(4, VOCAB, (3, T)).astype("int32")
    target[0, 1] = VOCAB + 2  # ... which the headline copies
    start = np.full((3, 1), 2, "int32")
    inputs = {
        "source_ids": source,
        "source_ext_ids": ext,
        "target_in": np.concatenate([start, target[:, :-1]], axis=1),
    }
    return inputs, target


def tiny_summarizers(count, **overrides):
    """`count` built summarizers of `tiny_config(**overrides)`, each with its
    own random weights.

    Args:
        count: how many.
        **overrides: `SummarizerConfig` fields, as for `tiny_config`.

    Returns:
        A list of `HeadlineSummarizer`s, called once on `tiny_batch()`.
    """
    inputs, _ = tiny_batch()
    members = []
    for _ in range(count):
        model = HeadlineSummarizer(tiny_config(**overrides))
        model(inputs)
        members.append(model)
    return members
