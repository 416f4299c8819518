"""A run's examples prepared for a training process without TensorFlow
(`train.py --backend jax`), written by the TensorFlow process that encodes
them (`train.py --prepare-arrays`).

The run's `prepared/` folder holds each split's token-id arrays
(`models.data.arrays`), the validation ROUGE sample as the export's text
steps encode it (`models.decoding.id_search.write_sample`), and a manifest
(`prepared.json`) naming them with the flags that chose their examples,
which `models.training.array_training` reads and checks.
"""

import sys

import numpy as np

from models import data
from models.decoding.id_search import write_sample
from models.settings.folder_layout import (
    PREPARED_DIR,
    PREPARED_MANIFEST_FILE,
    prepared_arrays_dir,
)
from models.settings.json_files import write_json

# The flags whose values chose the prepared examples.
MANIFEST_FLAGS = (
    "max_train_examples",
    "validation_loss_examples",
    "validation_rouge_examples",
)


def manifest_flags(settings):
    """`{flag: value}` of `MANIFEST_FLAGS` in `train.py`'s `settings`."""
    options = settings.training
    return {
        "max_train_examples": settings.run.max_train_examples,
        "validation_loss_examples": options.validation_loss_examples,
        "validation_rouge_examples": options.validation_rouge_examples,
    }


def write_prepared(run_dir, encoded, sample, features, settings):
    """Writes the run's prepared examples and their manifest.

    Args:
        run_dir: The run folder.
        encoded: `{split: dataset}` of `models.data.encode_dataset`'s
            examples, "train" and "validation".
        sample: The validation ROUGE sample, `(document, summary)` bytes.
        features: The run's `TextFeatures`.
        settings: `train.py`'s `TrainSettings`.
    """
    folders = {}
    for split, examples in encoded.items():
        count = int(examples.cardinality())
        if count < 0:
            count = data.count_batches(examples)
        folder = prepared_arrays_dir(run_dir, split, count)
        if not folder.is_dir():
            print(
                f"Writing the {count:,} {split} examples into {folder}", file=sys.stderr
            )
        data.write_arrays(examples.as_numpy_iterator(), folder)
        folders[split] = folder.name
    name = f"rouge-{len(sample)}.json"
    write_sample(
        run_dir / PREPARED_DIR / name,
        _encoded_sources(features, [d for d, _ in sample]),
        [s.decode("utf-8") for _, s in sample],
    )
    write_json(
        run_dir / PREPARED_DIR / PREPARED_MANIFEST_FILE,
        {**folders, "rouge": name, **manifest_flags(settings)},
    )


def _encoded_sources(features, documents, batch=256):
    """Each document's `ids`, `ext_ids` and `tokens` as the export's text
    steps make them (`TextFeatures.encode_source`), padding removed."""
    rows = []
    for start in range(0, len(documents), batch):
        source = features.encode_source(np.array(documents[start : start + batch]))
        tokens = source["tokens"].numpy()
        for i in range(tokens.shape[0]):
            length = int(np.sum(tokens[i] != b""))
            rows.append(
                {
                    "ids": source["ids"].numpy()[i, :length].tolist(),
                    "ext_ids": source["ext_ids"].numpy()[i, :length].tolist(),
                    "tokens": [t.decode("utf-8") for t in tokens[i, :length]],
                }
            )
    return rows
