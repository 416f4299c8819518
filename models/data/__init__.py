"""Gigaword (document, headline) pairs as `tf.data` pipelines.

One module per concern, each importing only those before it:

* `sources`: finding, fingerprinting and validating a local copy of the
  Gigaword download (`ggw_data.zip` or its `org_data/` folder);
* `offline`: preparing the TFDS `gigaword` dataset from such a copy, with the
  installed TFDS builder and no network (`prepare_offline`);
* `splits`: one split as `(document, summary)` pairs, from TFDS, a prepared
  TFDS folder, a local copy or plain text files (`load_split`);
* `batches`: shuffled, length-bucketed, padded batches (`make_batches`).
"""

from models.data.batches import make_batches
from models.data.offline import prepare_offline
from models.data.sources import SPLITS
from models.data.splits import load_split

__all__ = ["SPLITS", "load_split", "make_batches", "prepare_offline"]
