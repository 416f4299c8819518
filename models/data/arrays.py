"""Prepared examples as token-id arrays, and their batches: numpy and Keras
only, so that a training process without TensorFlow reads them
(`train.py --backend jax`).

A prepared folder (`write_arrays` writes it, from the examples that
`models.data.encode_dataset` tokenizes with TensorFlow) holds `arrays.json`
and one raw little-endian file per array: the examples' `source_ids` and
`source_ext_ids` (int32, one after another), `source_offsets` (int64,
`examples + 1`: example `i` is `[offsets[i], offsets[i + 1])`), and likewise
`target_in`, `target_out` and `target_offsets`. They are memory-mapped,
never read whole.

`ArrayBatches` is the training stream of `models.data.stream_batches` in
numpy: pass `p` is ordered by `(seed, p)` alone, so that a resumed run reads
the batches a run never cut reads, on any backend. Its batches are bucketed
by source length as `models.data.batched` buckets them (the same number of
batches in a pass, so the schedule is the same) but padded to the bucket's
fixed length, and a bucket's last, short batch is filled with empty rows
(all padding, no loss): a pass has one batch shape per bucket, and JAX
compiles a program per shape.
"""

import json
import math
import shutil
from pathlib import Path

import keras
import numpy as np

from models.settings.folder_layout import ARRAYS_FILE

# Bumped when the layout of a prepared folder changes.
FORMAT_VERSION = 1
SOURCE_ARRAYS = ("source_ids", "source_ext_ids")
TARGET_ARRAYS = ("target_in", "target_out")
ID_DTYPE = np.dtype("<i4")
OFFSET_DTYPE = np.dtype("<i8")


def source_buckets(max_source_length):
    """The length buckets of sources cut at `max_source_length`: up to a
    quarter of it, three eighths, a half, three quarters, and the rest
    (`(16, 24, 32, 48, 64)` for 64).

    Relative to the cut, so that long sources (a token per Chinese or
    Japanese character) are batched with sources of their own length, not
    padded to the longest of all.
    """
    bounds = {
        max(1, round(max_source_length * eighths / 8)) for eighths in (2, 3, 4, 6, 8)
    }
    return tuple(sorted(bounds))


def array_file(folder, name):
    """The raw file of array `name` in the prepared `folder`."""
    dtype = OFFSET_DTYPE if name.endswith("_offsets") else ID_DTYPE
    return Path(folder) / f"{name}.{dtype.str[1:]}"


def write_arrays(examples, folder):
    """Writes `examples` into the prepared `folder`, unless it is whole there
    already; returns its path.

    The examples stream to the files one at a time, so that a split never
    sits in memory whole; the folder is written aside and renamed when
    whole, so that a killed write leaves no folder that looks finished.

    Args:
        examples: Iterable of `(inputs, target_out)`, numpy arrays of their
            own lengths (`models.data.encode_dataset`'s, read with
            `as_numpy_iterator()`).
        folder: The prepared folder (its parent is created).
    """
    folder = Path(folder)
    if (folder / ARRAYS_FILE).is_file():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    names = SOURCE_ARRAYS + TARGET_ARRAYS
    ends = {"source": [0], "target": [0]}
    files = {name: open(array_file(partial, name), "xb") for name in names}  # noqa: SIM115
    try:
        for inputs, target_out in examples:
            row = {**inputs, "target_out": target_out}
            for name in names:
                files[name].write(np.asarray(row[name], ID_DTYPE).tobytes())
            ends["source"].append(ends["source"][-1] + len(inputs["source_ids"]))
            ends["target"].append(ends["target"][-1] + len(target_out))
    finally:
        for file in files.values():
            file.close()
    for side, offsets in ends.items():
        array_file(partial, f"{side}_offsets").write_bytes(
            np.asarray(offsets, OFFSET_DTYPE).tobytes()
        )
    meta = {
        "format": FORMAT_VERSION,
        "examples": len(ends["source"]) - 1,
        "source_tokens": ends["source"][-1],
        "target_tokens": ends["target"][-1],
    }
    (partial / ARRAYS_FILE).write_text(json.dumps(meta, indent=2), "utf-8")
    partial.rename(folder)
    return folder


class PreparedArrays:
    """The examples of a prepared folder, memory-mapped.

    Args:
        folder: A prepared folder (`write_arrays`).

    Example:

    >>> arrays = PreparedArrays(folder)  # doctest: +SKIP
    >>> inputs, target_out = arrays.example(0)  # doctest: +SKIP
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        meta = json.loads((self.folder / ARRAYS_FILE).read_text("utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(
                f"`folder` must hold prepared arrays of format {FORMAT_VERSION}. "
                f"Received: folder={self.folder} (format {meta.get('format')})"
            )
        self.meta = meta
        self.arrays = {
            name: _memmap(array_file(folder, name), dtype)
            for names, dtype in (
                (SOURCE_ARRAYS + TARGET_ARRAYS, ID_DTYPE),
                (("source_offsets", "target_offsets"), OFFSET_DTYPE),
            )
            for name in names
        }
        self.source_lengths = np.diff(self.arrays["source_offsets"])
        self.target_lengths = np.diff(self.arrays["target_offsets"])

    def __len__(self):
        return int(self.meta["examples"])

    def example(self, i):
        """Example `i` as `models.data.encode_dataset` gives it: `(inputs,
        target_out)`, numpy int32 arrays of their own lengths."""
        s0, s1 = self.arrays["source_offsets"][i : i + 2]
        t0, t1 = self.arrays["target_offsets"][i : i + 2]
        inputs = {
            "source_ids": np.asarray(self.arrays["source_ids"][s0:s1]),
            "source_ext_ids": np.asarray(self.arrays["source_ext_ids"][s0:s1]),
            "target_in": np.asarray(self.arrays["target_in"][t0:t1]),
        }
        return inputs, np.asarray(self.arrays["target_out"][t0:t1])


def _memmap(path, dtype):
    # An empty file cannot be mapped; no examples is an empty array.
    if path.stat().st_size == 0:
        return np.zeros((0,), dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def bucket_of(lengths, boundaries):
    """The bucket index of each source length: `tf.data`'s
    `bucket_by_sequence_length` rule, bucket `k` holding lengths in
    `[boundaries[k - 1], boundaries[k])` (`len(boundaries) + 1` buckets)."""
    return np.searchsorted(np.asarray(boundaries), lengths, side="right")


def pad_lengths(boundaries, max_source_length):
    """The fixed source length each bucket is padded to: one less than its
    bound, and `max_source_length` for the last bucket (sources are cut
    there)."""
    return tuple(int(b) - 1 for b in boundaries) + (max(int(max_source_length), 1),)


def pass_batches(source_lengths, batch_size, boundaries, *, seed, index):
    """The batches of pass `index` (from 0): a list of arrays of example
    indices, ordered by `(seed, index)` alone.

    The examples are shuffled, split by bucket (keeping that order), cut
    into batches of `batch_size` (a bucket's last one may be shorter), and
    the batches shuffled. Every pass has `sum(ceil(n_k / batch_size))`
    batches over the buckets' sizes `n_k`, as `models.data.pass_batches`.
    """
    rng = np.random.default_rng([int(seed), int(index)])
    order = rng.permutation(len(source_lengths))
    buckets = bucket_of(np.asarray(source_lengths)[order], boundaries)
    batches = []
    for bucket in range(len(boundaries) + 1):
        members = order[buckets == bucket]
        batches += [
            members[start : start + batch_size]
            for start in range(0, len(members), batch_size)
        ]
    return [batches[i] for i in rng.permutation(len(batches))]


def count_pass_batches(source_lengths, batch_size, boundaries):
    """The number of batches in a pass: `ceil(n_k / batch_size)` summed over
    the buckets' sizes `n_k`."""
    counts = np.bincount(
        bucket_of(source_lengths, boundaries), minlength=len(boundaries) + 1
    )
    return sum(math.ceil(int(n) / batch_size) for n in counts)


class ArrayBatches(keras.utils.PyDataset):
    """Length-bucketed, fixed-shape batches of prepared examples.

    Batch `i` of the dataset is batch `start[1] + i` of the stream of passes
    from pass `start[0]` (`pass_batches`), so that it is the same batch
    whichever batch a run (or a resumed run) starts at. A batch is
    `(inputs, target_out)`: `inputs` a dict of `source_ids`,
    `source_ext_ids` int32 `(batch_size, pad)` (`pad` the bucket's
    `pad_lengths`) and `target_in`, and `target_out` int32
    `(batch_size, target_length)`; rows past a short batch's examples are
    all 0.

    Args:
        arrays: `PreparedArrays`.
        batch_size: Python int >= 1, rows of every batch.
        boundaries: The source length buckets' bounds
            (`models.data.source_buckets`).
        max_source_length: Where the sources are cut, the last bucket's
            length.
        seed: Python int, the run's seed.
        start: `(pass, batch)`: where the stream starts.
        passes: Python int, the passes it holds; None: without end.
        shuffle: False: one pass in the file's order, bucket by bucket (for
            validation).
        target_length: The targets' padded length; the longest of `arrays`
            by default.
        shard: `(index, count)`: each batch is its `index`-th of `count`
            equal row blocks (`batch_size` must divide by `count`), the rows
            that process `index` of a multi-host run reads.
        **kwargs: `keras.utils.PyDataset`'s (`workers`, ...).
    """

    def __init__(
        self,
        arrays,
        batch_size,
        boundaries,
        max_source_length,
        *,
        seed=0,
        start=(0, 0),
        passes=None,
        shuffle=True,
        target_length=None,
        shard=(0, 1),
        **kwargs,
    ):
        super().__init__(**kwargs)
        if batch_size < 1:
            raise ValueError(
                f"`batch_size` must be >= 1. Received: batch_size={batch_size}"
            )
        self.arrays = arrays
        self.batch_size = int(batch_size)
        self.boundaries = tuple(int(b) for b in boundaries)
        self.pad_lengths = pad_lengths(self.boundaries, max_source_length)
        self.seed = int(seed)
        self.start = tuple(int(v) for v in start)
        self.passes = passes
        self.shuffle = shuffle
        self.target_length = int(
            target_length
            if target_length is not None
            else max(1, int(arrays.target_lengths.max(initial=1)))
        )
        index, count = (int(v) for v in shard)
        if not 0 <= index < count or self.batch_size % count:
            raise ValueError(
                "`shard` must be `(index, count)` with 0 <= index < count and "
                f"`batch_size`={self.batch_size} divisible by count. "
                f"Received: shard={shard}"
            )
        rows = self.batch_size // count
        self.rows = (index * rows, (index + 1) * rows)
        self.pass_size = count_pass_batches(
            arrays.source_lengths, self.batch_size, self.boundaries
        )
        self._pass = (None, None)

    @property
    def num_batches(self):
        if self.passes is None:
            return None
        return self.passes * self.pass_size - self.start[1]

    def __len__(self):
        return self.num_batches

    def position(self, i):
        """`(pass, batch)` of the dataset's batch `i`."""
        first, skip = self.start
        return first + (skip + i) // self.pass_size, (skip + i) % self.pass_size

    def _batches_of_pass(self, index):
        if self._pass[0] != index:
            lengths = self.arrays.source_lengths
            if self.shuffle:
                batches = pass_batches(
                    lengths,
                    self.batch_size,
                    self.boundaries,
                    seed=self.seed,
                    index=index,
                )
            else:
                buckets = bucket_of(lengths, self.boundaries)
                batches = [
                    members[s : s + self.batch_size]
                    for b in range(len(self.boundaries) + 1)
                    for members in [np.flatnonzero(buckets == b)]
                    for s in range(0, len(members), self.batch_size)
                ]
            self._pass = (index, batches)
        return self._pass[1]

    def __getitem__(self, i):
        if self.num_batches is not None and not 0 <= i < self.num_batches:
            raise IndexError(f"Batch index out of range. Received: i={i}")
        index, batch = self.position(i)
        return self.batch(self._batches_of_pass(index)[batch])

    def batch(self, examples):
        """The padded batch of the examples at indices `examples` (the
        rows of `shard`)."""
        lengths = self.arrays.source_lengths[examples]
        bucket = int(bucket_of(lengths[:1], self.boundaries)[0])
        width = self.pad_lengths[bucket]
        if int(lengths.max()) > width:
            raise ValueError(
                f"Sources must be cut at `max_source_length`={self.pad_lengths[-1]}. "
                f"Received: a source of {int(lengths.max())} tokens"
            )
        first, last = self.rows
        examples, arrays = examples[first:last], self.arrays.arrays
        rows = last - first
        out = {
            name: np.zeros(
                (rows, width if name in SOURCE_ARRAYS else self.target_length), np.int32
            )
            for name in SOURCE_ARRAYS + TARGET_ARRAYS
        }
        for row, i in enumerate(examples):
            for names, offsets in (
                (SOURCE_ARRAYS, arrays["source_offsets"]),
                (TARGET_ARRAYS, arrays["target_offsets"]),
            ):
                begin, end = int(offsets[i]), int(offsets[i + 1])
                for name in names:
                    out[name][row, : end - begin] = arrays[name][begin:end]
        target_out = out.pop("target_out")
        return out, target_out
