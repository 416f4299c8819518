"""A split's examples prepared as arrays with TensorFlow's tokenizing: the
same examples as `models.data.encode_dataset`'s, and as many batches a pass
as `models.data.pass_batches` gives (so the schedule is the same)."""

import pytest

pytestmark = pytest.mark.tf_only

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from models import data  # noqa: E402
from models.data.arrays import (  # noqa: E402
    ArrayBatches,
    PreparedArrays,
    count_pass_batches,
    write_arrays,
)
from models.text.features import RESERVED, TextFeatures  # noqa: E402

WORDS = "the central bank in zyxcorp cut rates on tuesday , floods hit north".split()
# Sources of 0 to 12 words (cut at 8), copied words among them.
DOCUMENTS = [" ".join(WORDS[i % 5 : i % 5 + i % 13]) for i in range(35)]
SUMMARIES = ["bank cuts rates", "floods hit north", "zyxcorp up", "talks", ""] * 7


def test_the_arrays_hold_the_encoded_examples(tmp_path):
    vocabulary = [*RESERVED, "the", "bank", "rates", "floods", "north", "in", "on"]
    features = TextFeatures(vocabulary, 8, 6)
    pairs = tf.data.Dataset.from_tensor_slices((DOCUMENTS, SUMMARIES))
    encoded = data.encode_dataset(pairs, features)
    folder = write_arrays(encoded.as_numpy_iterator(), tmp_path / "train")
    arrays = PreparedArrays(folder)
    expected = list(encoded.as_numpy_iterator())
    assert len(arrays) == len(expected) == 35
    for i, (inputs, target_out) in enumerate(expected):
        got_inputs, got_target = arrays.example(i)
        for name, value in inputs.items():
            np.testing.assert_array_equal(got_inputs[name], value)
        np.testing.assert_array_equal(got_target, target_out)
    # A copied word has its extended id, an empty document one 0 token.
    assert arrays.example(4)[0]["source_ext_ids"].max() >= len(vocabulary)
    assert arrays.example(0)[0]["source_ids"].tolist() == [0]
    # A pass has the batches of the tf.data pipeline, whatever their order.
    cached = data.cached_examples(encoded, tmp_path)
    assert len(set(arrays.source_lengths.tolist())) == 8
    for batch_size in (2, 3, 8):
        buckets = data.source_buckets(8)
        tf_count = data.count_batches(
            data.pass_batches(cached, batch_size, seed=1, index=0, max_source_length=8)
        )
        assert count_pass_batches(arrays.source_lengths, batch_size, buckets) == (
            tf_count
        )
        stream = ArrayBatches(arrays, batch_size, buckets, 8, passes=1)
        assert len(stream) == tf_count
