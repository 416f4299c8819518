"""Gigaword (document, headline) pairs as `tf.data` pipelines.

One module per concern, each importing only those before it:

* `sources`: finding, fingerprinting and validating a local copy of the
  Gigaword download (`ggw_data.zip` or its `org_data/` folder);
* `offline`: preparing the TFDS `gigaword` dataset from such a copy, with the
  installed TFDS builder and no network (`prepare_offline`);
* `splits`: one split as `(document, summary)` pairs, from TFDS, a prepared
  TFDS folder, a local copy or plain text files (`load_split`);
* `batches`: shuffled, length-bucketed, padded batches (`make_batches`);
* `word_counts`: the words of a training split, counted and ranked
  (`count_words`, `split_vocabulary`);
* `lengths`: the token lengths of a split's pairs, on a bounded sample
  (`measure_lengths`);
* `examples`: pairs to the model's examples and batches (`encode_dataset`,
  `batched`), the training examples read once
  (`cached_examples`, `training_cache`), and the training stream of passes
  (`pass_batches`, `stream_batches`, `count_batches`);
* `arrays`: prepared examples as memory-mapped token-id arrays and their
  fixed-shape batches (`PreparedArrays`, `ArrayBatches`), and the length
  buckets of both pipelines (`source_buckets`), numpy and Keras
  only; a split's examples written as such arrays (`write_arrays`).

The names below are read from their modules when first used, so that
`models.data.arrays` is imported without TensorFlow (a training process
without it reads the prepared arrays).
"""

import importlib

from models.settings.data import SPLITS

_MODULES = {
    "make_batches": "batches",
    **dict.fromkeys(
        (
            "batched",
            "cached_examples",
            "count_batches",
            "encode_dataset",
            "pass_batches",
            "stream_batches",
            "training_cache",
        ),
        "examples",
    ),
    "measure_lengths": "lengths",
    "prepare_offline": "offline",
    "load_split": "splits",
    **dict.fromkeys(("count_words", "split_vocabulary"), "word_counts"),
    **dict.fromkeys(
        ("ArrayBatches", "PreparedArrays", "source_buckets", "write_arrays"), "arrays"
    ),
}
__all__ = ["SPLITS", *sorted(_MODULES)]


def __getattr__(name):
    # PEP 562: `models.data.batched` imports `models.data.examples` (and
    # TensorFlow) then.
    if name in _MODULES:
        return getattr(importlib.import_module(f"models.data.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'models.data' has no attribute {name!r}")
