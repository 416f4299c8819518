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
  `batched`, `source_buckets`), the training examples read once
  (`cached_examples`, `training_cache`), and the training stream of passes
  (`pass_batches`, `stream_batches`, `count_batches`).
"""

from models.data.batches import make_batches
from models.data.examples import (
    batched,
    cached_examples,
    count_batches,
    encode_dataset,
    pass_batches,
    source_buckets,
    stream_batches,
    training_cache,
)
from models.data.lengths import measure_lengths
from models.data.offline import prepare_offline
from models.data.splits import load_split
from models.data.word_counts import count_words, split_vocabulary
from models.settings.data import SPLITS

__all__ = [
    "SPLITS",
    "batched",
    "cached_examples",
    "count_batches",
    "count_words",
    "encode_dataset",
    "load_split",
    "make_batches",
    "measure_lengths",
    "pass_batches",
    "prepare_offline",
    "split_vocabulary",
    "source_buckets",
    "stream_batches",
    "training_cache",
]
