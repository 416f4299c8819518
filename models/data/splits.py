"""One split as `(document, summary)` pairs, from wherever the data is."""

import difflib
import os
import re
from pathlib import Path

import tensorflow as tf

from models.data.offline import prepare_offline
from models.data.sources import SPLIT_FILES, find_source, validate
from models.settings.data import SPLITS, DataSource
from models.settings.errors import UserError

_SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}


def _prepared_tfds_dir(path, dataset):
    if not path.is_dir():
        return False
    # `<dir>/<dataset>/<version>/` or `<dir>/<dataset>/<config>/<version>/`
    return any((path / dataset).glob("*/dataset_info.json")) or any(
        (path / dataset).glob("*/*/dataset_info.json")
    )


def _canonical_split(split, strict):
    """Maps `dev` -> `validation`; checks the base name for Gigaword splits."""
    if not isinstance(split, str):
        raise UserError(f"`split` must be a string. Received: split={split!r}")
    match = re.match(r"^\s*(\w+)", split)
    base = match.group(1) if match else ""
    canonical = _SPLIT_ALIASES.get(base, base)
    if strict and canonical not in SPLITS:
        raise UserError(
            f"`split` must be one of {', '.join(SPLITS)}. Received: split={split!r}"
        )
    return canonical + split[match.end() :] if match else split


def _tfds_builder(dataset, data_dir):
    import tensorflow_datasets as tfds

    try:
        return tfds.builder(dataset, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        names = tfds.list_builders(with_community_datasets=False)
        close = difflib.get_close_matches(dataset, names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UserError(
            f"`dataset` must be a TFDS dataset{hint}. Received: dataset={dataset!r}"
        ) from None


def _check_keys(builder, source):
    features = builder.info.features
    text_keys = sorted(k for k in features.keys() if features[k].tf_dtype == tf.string)
    for name in ("document_key", "summary_key"):
        key = getattr(source, name)
        if key not in text_keys:
            raise UserError(
                f"`{name}` must name a text feature of TFDS dataset "
                f"{builder.name!r} (available keys: {', '.join(text_keys)}). "
                f"Received: {name}={key!r}"
            )


def _as_pairs(builder, split, source):
    available = list(builder.info.splits.keys())
    base = re.match(r"^\s*(\w+)", split)
    if available and base and base.group(1) not in available:
        raise UserError(
            f"`split` must be a split of TFDS dataset {builder.name!r}: "
            f"{', '.join(available)}. Received: split={split!r}"
        )
    ds = builder.as_dataset(split=split, shuffle_files=False)
    document_key, summary_key = source.document_key, source.summary_key
    return ds.map(
        lambda ex: (ex[document_key], ex[summary_key]),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _text_pairs(copy, split):
    """Pairs read straight from the org_data files of the local copy `copy`
    (no TFDS, no `<unk>` rewrite)."""
    if copy.kind != "dir":
        raise UserError(
            "A zip archive is only read through the TFDS gigaword builder: "
            f"`dataset` must be 'gigaword'. Received: data_dir={copy.path}"
        )
    if split not in SPLITS:
        raise UserError(
            f"`split` must be one of {', '.join(SPLITS)}. Received: split={split!r}"
        )
    pairs = validate(copy, [split])[split]
    prefix = str(copy.path / SPLIT_FILES[split])
    # The validated line count, as TFDS's datasets have theirs: it sizes the
    # cache of the encoded examples (`models.data.training_cache`).
    return (
        tf.data.Dataset.zip(
            tf.data.TextLineDataset(prefix + ".src.txt"),
            tf.data.TextLineDataset(prefix + ".tgt.txt"),
        )
        .map(
            lambda d, s: (tf.strings.strip(d), tf.strings.strip(s)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .apply(tf.data.experimental.assert_cardinality(pairs))
    )


def load_split(split, source: DataSource):
    """Loads one split of `source` as `(document, summary)` pairs of
    `tf.string` scalars.

    Where it is read from follows `source`'s `dataset` and `data_dir`:

    - `data_dir=None`: `tfds.load(dataset, split=split)` (downloads and
      prepares on first use, as usual; `tfds_dir` is TFDS's `data_dir`).
    - `dataset="gigaword"` and `data_dir` a local copy of the download (see
      `prepare_offline`): the TFDS `gigaword` dataset is prepared from it once,
      offline, into `tfds_dir`, then read from there.
    - `data_dir` a TFDS data dir that already holds `dataset`: read from it.
    - another `dataset` and `data_dir` a folder in `org_data` layout
      (`{train,dev,test}.{src,tgt}.txt`): the plain text files, line N of the
      two files being one pair.

    Args:
        split: `"train"`, `"validation"` (or `"dev"`) or `"test"`; TFDS slicing
            such as `"train[:1000]"` works on the TFDS paths.
        source: the `models.settings.data.DataSource`: the dataset, its
            folders and the names of its document and summary features.

    Returns:
        `tf.data.Dataset` of `(document, summary)`, both `tf.string` with
        shape `()`: in TFDS's (fixed, hashed) order when read through TFDS, in
        file order when read from plain text files.

    Raises:
        UserError: missing or invalid data, unknown dataset, split or key.
    """
    gigaword = source.dataset == "gigaword"
    split = _canonical_split(split, strict=gigaword)
    data_dir = source.data_dir
    if data_dir is None:
        builder = _downloaded(source)
    elif _prepared_tfds_dir(Path(data_dir).expanduser(), source.dataset):
        builder = _prepared(source)
    elif not gigaword:
        return _text_pairs(find_source(data_dir), split)
    else:
        # The keys are checked against the builder's features before preparing.
        _check_keys(_tfds_builder(source.dataset, None), source)
        builder = prepare_offline(data_dir, tfds_dir=source.tfds_dir)
    return _as_pairs(builder, split, source)


def _downloaded(source):
    """TFDS's builder of `source.dataset`, downloaded and prepared on first use."""
    tfds_dir = source.tfds_dir
    builder = _tfds_builder(
        source.dataset, None if tfds_dir is None else os.fspath(tfds_dir)
    )
    _check_keys(builder, source)
    try:
        builder.download_and_prepare()
    except ModuleNotFoundError as e:
        if e.name != "importlib_resources":
            raise
        # tensorflow-datasets 4.9.x imports it for downloads on any Python
        # but declares it only for Python < 3.9.
        raise UserError(
            "tensorflow_datasets needs the importlib_resources package to "
            "download (pip install importlib_resources), or pass data_dir"
        ) from None
    return builder


def _prepared(source):
    """The builder of `source.dataset` already prepared in the TFDS folder
    `source.data_dir`."""
    path = Path(source.data_dir).expanduser()
    builder = _tfds_builder(source.dataset, os.fspath(path))
    _check_keys(builder, source)
    if not builder.is_prepared():
        raise UserError(
            f"`data_dir` must hold version {builder.version} of {source.dataset}. "
            f"Received: data_dir={path}, which holds another version"
        )
    return builder
