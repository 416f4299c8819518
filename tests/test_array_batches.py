"""Prepared arrays and their fixed-shape batches (`models.data.arrays`):
numpy and Keras only, so this file runs on every backend, and the digest of
a seed's batches is one constant on all three (the same batches on
TensorFlow, JAX and torch)."""

import hashlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from models.data.arrays import (
    ArrayBatches,
    PreparedArrays,
    bucket_of,
    count_pass_batches,
    pad_lengths,
    write_arrays,
)

BOUNDARIES = (16, 24, 32, 48, 64)
SOURCE_LENGTHS = (3, 17, 5, 30, 2, 64, 20)
TARGET_LENGTHS = (4, 2, 6, 3, 5, 1, 7)


def examples(source_lengths=SOURCE_LENGTHS, target_lengths=TARGET_LENGTHS):
    """Example `i`: source ids `100 * (i + 1) + position`, ext ids those
    plus 1, targets `1000 * (i + 1) + position` (in) and plus 1 (out)."""
    for i, (s, t) in enumerate(zip(source_lengths, target_lengths, strict=True)):
        source = 100 * (i + 1) + np.arange(s, dtype=np.int32)
        target = 1000 * (i + 1) + np.arange(t, dtype=np.int32)
        inputs = {
            "source_ids": source,
            "source_ext_ids": source + 1,
            "target_in": target,
        }
        yield inputs, target + 1


@pytest.fixture
def arrays(tmp_path):
    return PreparedArrays(write_arrays(examples(), tmp_path / "prepared" / "train"))


def test_the_arrays_read_back_each_example(arrays, tmp_path):
    assert len(arrays) == 7
    assert arrays.source_lengths.tolist() == list(SOURCE_LENGTHS)
    for i, (inputs, target_out) in enumerate(examples()):
        got_inputs, got_target = arrays.example(i)
        for name, value in inputs.items():
            np.testing.assert_array_equal(got_inputs[name], value)
        np.testing.assert_array_equal(got_target, target_out)
    # Memory-mapped, not read into memory.
    assert isinstance(arrays.arrays["source_ids"], np.memmap)
    assert not (tmp_path / "prepared" / "train.partial").exists()


def test_a_whole_folder_is_not_written_again(arrays, tmp_path):
    folder = tmp_path / "prepared" / "train"
    write_arrays(examples(source_lengths=(1,) * 7), folder)
    assert PreparedArrays(folder).source_lengths.tolist() == list(SOURCE_LENGTHS)


def test_buckets_follow_tf_data_bounds():
    # `bucket_by_sequence_length`: bucket k holds [bounds[k-1], bounds[k]).
    assert bucket_of(np.array(SOURCE_LENGTHS), BOUNDARIES).tolist() == [
        0,
        1,
        0,
        2,
        0,
        5,
        1,
    ]
    assert pad_lengths(BOUNDARIES, 64) == (15, 23, 31, 47, 63, 64)
    # Buckets of 3, 2, 1 and 1 examples, two a batch: 2 + 1 + 1 + 1.
    assert count_pass_batches(np.array(SOURCE_LENGTHS), 2, BOUNDARIES) == 5


def batches_of(dataset, count):
    return [dataset[i] for i in range(count)]


def rows(batch):
    """The example each row holds (its first source id // 100 - 1), -1 for
    an empty row."""
    inputs, _ = batch
    return [int(r) // 100 - 1 if r else -1 for r in inputs["source_ids"][:, 0]]


def test_a_pass_holds_every_example_once_in_fixed_shapes(arrays):
    dataset = ArrayBatches(arrays, 2, BOUNDARIES, 64, seed=3, passes=1)
    assert len(dataset) == 5
    seen = []
    for inputs, target_out in batches_of(dataset, 5):
        width = inputs["source_ids"].shape[1]
        assert width in (15, 23, 31, 47, 63, 64)
        assert inputs["source_ext_ids"].shape == (2, width)
        assert inputs["target_in"].shape == target_out.shape == (2, 7)
        seen += rows((inputs, target_out))
    assert sorted(seen) == [-1, -1, -1, 0, 1, 2, 3, 4, 5, 6]


def test_a_batch_pads_each_row_with_zeros(arrays):
    dataset = ArrayBatches(arrays, 2, BOUNDARIES, 64)
    inputs, target_out = dataset.batch(np.array([2, 0]))  # lengths 5 and 3
    assert inputs["source_ids"].shape == (2, 15)
    assert inputs["source_ids"][0].tolist() == [300, 301, 302, 303, 304] + [0] * 10
    assert inputs["source_ext_ids"][1].tolist() == [101, 102, 103] + [0] * 12
    assert inputs["target_in"][1].tolist() == [1000, 1001, 1002, 1003, 0, 0, 0]
    assert target_out[0].tolist() == [3001, 3002, 3003, 3004, 3005, 3006, 0]
    inputs, target_out = dataset.batch(np.array([5]))  # length 64, one row
    assert inputs["source_ids"].shape == (2, 64)
    assert inputs["source_ids"][1].tolist() == [0] * 64
    assert target_out[1].tolist() == [0] * 7


def test_passes_differ_and_depend_on_the_seed_alone(arrays):
    def order(seed, passes=2):
        dataset = ArrayBatches(arrays, 2, BOUNDARIES, 64, seed=seed)
        return [rows(b) for b in batches_of(dataset, 5 * passes)]

    first = order(3)
    assert first == order(3)
    assert first[:5] != first[5:]
    assert first != order(4)


def test_a_stream_started_mid_pass_reads_what_an_uncut_one_reads(arrays):
    whole = ArrayBatches(arrays, 2, BOUNDARIES, 64, seed=3)
    resumed = ArrayBatches(arrays, 2, BOUNDARIES, 64, seed=3, start=(1, 2))
    assert resumed.position(0) == (1, 2) and resumed.position(3) == (2, 0)
    for i in range(8):
        a, b = whole[7 + i], resumed[i]
        for name in a[0]:
            np.testing.assert_array_equal(a[0][name], b[0][name])
        np.testing.assert_array_equal(a[1], b[1])


def test_validation_batches_are_one_pass_in_file_order(arrays):
    dataset = ArrayBatches(arrays, 2, BOUNDARIES, 64, shuffle=False, passes=1)
    assert [rows(b) for b in batches_of(dataset, 5)] == [
        [0, 2],
        [4, -1],
        [1, 6],
        [3, -1],
        [5, -1],
    ]
    with pytest.raises(IndexError):
        dataset[5]


def test_a_source_past_the_cut_is_refused(arrays):
    with pytest.raises(ValueError, match="max_source_length"):
        ArrayBatches(arrays, 2, BOUNDARIES, 48).batch(np.array([5]))


def batches_digest(arrays, seed):
    dataset = ArrayBatches(arrays, 2, BOUNDARIES, 64, seed=seed)
    digest = hashlib.sha256()
    for inputs, target_out in batches_of(dataset, 15):
        for name in sorted(inputs):
            digest.update(inputs[name].tobytes())
        digest.update(target_out.tobytes())
    return digest.hexdigest()[:16]


# The batches of three passes of `seed=7`. The suite runs this file on
# TensorFlow, JAX and torch: the constant says they all read these batches.
DIGEST = "b6f6831e9b64b22f"


def test_every_backend_reads_the_same_batches(arrays):
    assert batches_digest(arrays, 7) == DIGEST


def test_reading_the_batches_imports_no_tensorflow(tmp_path):
    folder = tmp_path / "prepared"
    write_arrays(examples(), folder)
    code = (
        "import sys\n"
        "from models.data.arrays import ArrayBatches, PreparedArrays\n"
        f"d = ArrayBatches(PreparedArrays({str(folder)!r}), 2, (16, 24), 64)\n"
        "d[0]\n"
        "print('tensorflow' in sys.modules)\n"
    )
    # A backend without TensorFlow: JAX where it is installed (CI's
    # environment without TensorFlow), else torch.
    backend = "jax" if importlib.util.find_spec("jax") else "torch"
    env = {**os.environ, "KERAS_BACKEND": backend}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert out.stdout.strip() == "False"


def test_empty_rows_leave_the_summarizers_loss_as_it_is(tmp_path):
    # A short batch is filled with all-padding rows: they must add nothing
    # to the loss (no NaN from an all-masked source either), on every backend.
    from models.model.summarizer import HeadlineSummarizer
    from models.settings.model import SummarizerConfig

    config = SummarizerConfig(
        vocab_size=30,
        embedding_dim=8,
        hidden_size=8,
        attention_units=4,
        max_source_length=64,
        max_target_length=7,
        sampled_softmax=0,
    )
    small = [
        ({k: v % 25 + 4 for k, v in inputs.items()}, target % 25 + 4)
        for inputs, target in examples()
    ]
    arrays = PreparedArrays(write_arrays(small, tmp_path / "small"))
    dataset = ArrayBatches(arrays, 4, BOUNDARIES, 64)
    inputs, target_out = dataset.batch(np.array([0, 2, 4]))  # lengths 3, 5, 2
    assert rows((inputs, target_out))[-1] == -1
    model = HeadlineSummarizer(config)
    padded = float(model.compute_loss(inputs, target_out, model(inputs)))
    three = {name: value[:3] for name, value in inputs.items()}
    alone = float(model.compute_loss(three, target_out[:3], model(three)))
    assert np.isfinite(padded)
    np.testing.assert_allclose(padded, alone, rtol=1e-5)


def test_the_shards_of_a_batch_are_its_rows_in_order(arrays):
    # Each process of a multi-host run reads its own rows of every global
    # batch; together, in process order, they are the batch.
    whole = ArrayBatches(arrays, 4, BOUNDARIES, 64, seed=3, passes=1)
    shards = [
        ArrayBatches(arrays, 4, BOUNDARIES, 64, seed=3, passes=1, shard=(k, 2))
        for k in range(2)
    ]
    assert len(shards[1]) == len(whole)
    for i in range(len(whole)):
        inputs, target_out = whole[i]
        parts = [shard[i] for shard in shards]
        assert [p[1].shape[0] for p in parts] == [2, 2]
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), target_out)
        for name, value in inputs.items():
            np.testing.assert_array_equal(
                np.concatenate([p[0][name] for p in parts]), value
            )
    with pytest.raises(ValueError, match="Received: shard=\\(0, 3\\)"):
        ArrayBatches(arrays, 4, BOUNDARIES, 64, shard=(0, 3))
