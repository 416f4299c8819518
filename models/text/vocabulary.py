"""The vocabulary: reserved tokens first, then words by frequency."""

import collections
from collections.abc import Mapping

import tensorflow as tf

from models.text.ids import END, PAD, RESERVED, START, UNK, UNK_ALIASES  # noqa: F401


def _count_tokens(source):
    counts = collections.Counter()
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
    tokens_or_counts,
    max_size=None,
    min_count=1,
    reserved=RESERVED,
):
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
