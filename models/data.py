"""Gigaword (document, headline) pairs as `tf.data` pipelines.

`load_split` reads the TFDS `gigaword` dataset. Online, TFDS downloads and
prepares it as usual. Offline, `data_dir` points at a local copy of the very
archive the TFDS builder downloads (`ggw_data.zip`, or its unpacked `org_data/`
folder): the files are validated, then the installed TFDS `gigaword` builder
prepares the dataset from them with its own split generation and example code
(including its `<unk>` -> `UNK` rewrite in train and validation). Only the
download step is replaced, by a download manager that resolves the builder's
URL to the local copy. The prepared TFRecords go to a TFDS data dir (by default
`$TFDS_DATA_DIR` or `~/tensorflow_datasets`, under `offline/gigaword-<key>`,
one per source, so that they never shadow the full online dataset).

`make_batches` turns pairs into shuffled, length-bucketed, padded batches.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import tensorflow as tf

from models.errors import UserError

SPLITS = ("train", "validation", "test")
# TFDS split name -> file prefix in org_data/ (the builder's own mapping).
SPLIT_FILES = {"train": "train", "validation": "dev", "test": "test"}
_SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}
ARCHIVE_NAME = "ggw_data.zip"  # file name in TFDS's url_checksums/gigaword.txt
ORG_DATA = "org_data"
_MARKER = "gigaword_offline_source.json"


@dataclasses.dataclass(frozen=True)
class _Source:
    """A local copy of the gigaword download.

    `kind` is "dir" (`path` is the folder holding the six text files) or "zip"
    (`path` is the archive, `prefix` the member folder holding the files).
    """

    kind: str
    path: Path
    prefix: str = ""

    def file_names(self) -> list[str]:
        return [
            f"{SPLIT_FILES[s]}.{side}.txt" for s in SPLITS for side in ("src", "tgt")
        ]

    def _paths(self) -> list[Path]:
        if self.kind == "zip":
            paths = [self.path]
        else:
            paths = [self.path / name for name in self.file_names()]
        for p in paths:
            if not p.is_file():
                raise UserError(f"missing file (or not a file): {p}")
        return paths

    def fingerprint(self) -> str:
        """Cheap identity of the source: path, sizes and modification times."""
        h = hashlib.sha256(f"{self.kind}:{self.path.resolve()}:{self.prefix}".encode())
        for p in self._paths():
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()[:12]

    def content_digest(self) -> str:
        """What the files hold, wherever they are and whenever written: for
        when `fingerprint` changed because they were copied or touched."""
        h = hashlib.sha256(self.prefix.encode())
        for p in self._paths():
            h.update(p.name.encode())
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        return h.hexdigest()

    def describe(self) -> str:
        return f"{self.path.resolve()}" + (
            f" ({self.prefix or '.'} in archive)" if self.prefix else ""
        )


# ----------------------------------------------------------------------------
# Finding and validating a local copy.


def _is_org_data_dir(path: Path) -> bool:
    return path.is_dir() and any(
        (path / f"{prefix}.src.txt").exists() for prefix in SPLIT_FILES.values()
    )


def _prepared_tfds_dir(path: Path, dataset: str) -> bool:
    if not path.is_dir():
        return False
    # `<dir>/<dataset>/<version>/` or `<dir>/<dataset>/<config>/<version>/`
    return any((path / dataset).glob("*/dataset_info.json")) or any(
        (path / dataset).glob("*/*/dataset_info.json")
    )


def _zip_source(path: Path) -> _Source:
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError(f"cannot read zip archive {path}: {e}") from None
    # The TFDS builder reads `<extracted>/org_data/*.txt`; accept the folder at
    # any depth (e.g. `ggw_data/org_data/`) and hand the builder its parent.
    for name in sorted(names, key=len):
        if name.endswith(f"{ORG_DATA}/train.src.txt"):
            return _Source("zip", path, name[: -len("train.src.txt")])
    raise UserError(
        f"A zip archive must hold {ORG_DATA}/train.src.txt. Received: {path} "
        f"(members: {', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})"
    )


def _find_source(data_dir: str | os.PathLike) -> _Source:
    """Resolves `data_dir` to the local copy of the gigaword download."""
    path = Path(data_dir).expanduser()
    if not path.exists():
        raise UserError(f"`data_dir` must exist. Received: data_dir={path}")
    if path.is_file():
        if zipfile.is_zipfile(path):
            return _zip_source(path)
        raise UserError(
            "`data_dir` must be a folder or a zip archive. Received: "
            f"data_dir={path}, a file but not a zip archive"
        )
    if not os.access(path, os.R_OK | os.X_OK):
        raise UserError(f"`data_dir` must be readable. Received: data_dir={path}")
    if _is_org_data_dir(path):
        return _Source("dir", path)
    if _is_org_data_dir(path / ORG_DATA):
        return _Source("dir", path / ORG_DATA)
    # TFDS manual-download convention: the archive under its own file name, in
    # the manual dir itself or in `<tfds data dir>/downloads/manual/`.
    for archive in (path / ARCHIVE_NAME, path / "downloads" / "manual" / ARCHIVE_NAME):
        if archive.is_file():
            return _zip_source(archive)
    raise UserError(
        f"`data_dir` must hold Gigaword data: {ORG_DATA}/"
        "{train,dev,test}.{src,tgt}.txt, the files themselves, "
        f"{ARCHIVE_NAME}, downloads/manual/{ARCHIVE_NAME}, or a prepared TFDS dir. "
        f"Received: data_dir={path}"
    )


def _check_lines(name: str, lines) -> int:
    """Counts lines, rejecting empty lines and bytes that are not UTF-8."""
    count = 0
    for count, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UserError(
                f"{name} line {count}: not UTF-8 (byte {raw[e.start : e.start + 1]!r} "
                f"at column {e.start + 1})"
            ) from None
        if not text.strip():
            raise UserError(f"{name} line {count}: empty line")
    if count == 0:
        raise UserError(f"{name} is empty")
    return count


def _validate(source: _Source, splits: Sequence[str] = SPLITS) -> dict[str, int]:
    """Validates the text files of `splits`; returns the pair count per split.

    One sequential pass over the bytes (no parsing beyond UTF-8 decoding), so
    that the builder cannot fail half-way or silently truncate a split (it
    zips the two files, stopping at the shorter one).
    """
    counts = {}
    zf = zipfile.ZipFile(source.path) if source.kind == "zip" else None
    try:
        for split in splits:
            n = {}
            shown = {}
            for side in ("src", "tgt"):
                fname = f"{SPLIT_FILES[split]}.{side}.txt"
                if zf is not None:
                    member = source.prefix + fname
                    shown[side] = f"{source.path}:{member}"
                    try:
                        f = zf.open(member)
                    except KeyError:
                        raise UserError(f"missing file: {shown[side]}") from None
                else:
                    fpath = source.path / fname
                    shown[side] = str(fpath)
                    if not fpath.is_file():
                        raise UserError(f"missing file (or not a file): {fpath}")
                    try:
                        f = open(fpath, "rb")  # noqa: SIM115 - closed below
                    except OSError as e:
                        raise UserError(f"cannot read {fpath}: {e.strerror}") from None
                with f:
                    try:
                        n[side] = _check_lines(shown[side], f)
                    except (OSError, zipfile.BadZipFile) as e:
                        raise UserError(f"cannot read {shown[side]}: {e}") from None
            if n["src"] != n["tgt"]:
                raise UserError(
                    f"line counts differ for split {split!r}: {shown['src']} has "
                    f"{n['src']} lines, {shown['tgt']} has {n['tgt']}"
                )
            counts[split] = n["src"]
    finally:
        if zf is not None:
            zf.close()
    return counts


# ----------------------------------------------------------------------------
# Offline TFDS preparation.


def _default_tfds_root() -> Path:
    return Path(os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")).expanduser()


def _local_download_manager_cls():
    import tensorflow_datasets as tfds

    class LocalSourceDownloadManager(tfds.download.DownloadManager):
        """Download manager that resolves every URL to a local copy.

        `download_and_extract(url)` returns a folder with `org_data/` inside, as
        the real download+extraction of `ggw_data.zip` would; a zip archive is
        extracted with TFDS's own extractor. Nothing is fetched from the network.
        """

        def __init__(self, *, source: _Source, staging_dir: Path, **kwargs):
            super().__init__(**kwargs)
            self._source = source
            self._staging_dir = staging_dir

        def _map(self, fn, urls):
            if isinstance(urls, dict):
                return {k: self._map(fn, v) for k, v in urls.items()}
            if isinstance(urls, (list, tuple)):
                return type(urls)(self._map(fn, v) for v in urls)
            return fn(urls)

        def _root(self, _url=None):
            if self._source.kind == "zip":
                resource = tfds.download.Resource(
                    path=self._source.path,
                    extract_method=tfds.download.ExtractMethod.ZIP,
                )
                extracted = Path(self.extract(resource))
                # `prefix` is ".../org_data/"; the builder wants its parent.
                return extracted / Path(self._source.prefix).parent
            if self._source.path.name == ORG_DATA:
                return self._source.path.parent
            # Files in a folder not named org_data: link them under that name.
            link = self._staging_dir / ORG_DATA
            if not link.exists():
                self._staging_dir.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self._source.path.resolve(), target_is_directory=True)
            return self._staging_dir

        def download(self, url_or_urls):
            return self._map(lambda _: self._source.path, url_or_urls)

        def download_and_extract(self, url_or_urls):
            return self._map(self._root, url_or_urls)

    return LocalSourceDownloadManager


def prepare_offline(
    data_dir: str | os.PathLike,
    *,
    tfds_dir: str | os.PathLike | None = None,
):
    """Prepares the TFDS `gigaword` dataset from a local copy of its source.

    Args:
        data_dir: `ggw_data.zip`, its `org_data/` folder (or the folder holding
            `org_data/`), a TFDS manual dir holding `ggw_data.zip`, or a TFDS
            data dir with `downloads/manual/ggw_data.zip`.
        tfds_dir: where the prepared dataset is written (TFDS data dir
            layout, `<tfds_dir>/gigaword/<version>/`). Defaults to
            `$TFDS_DATA_DIR` or `~/tensorflow_datasets`, under
            `offline/gigaword-<key>` where `<key>` identifies the source.

    Returns:
        The prepared `tfds.core.DatasetBuilder` (call `as_dataset` on it).

    Raises:
        UserError: the source is missing or invalid, or `tfds_dir` already
            holds `gigaword` prepared from another source.
    """
    import tensorflow_datasets as tfds

    source = _find_source(data_dir)
    key = source.fingerprint()
    if tfds_dir is None:
        root = _default_tfds_root() / "offline" / f"gigaword-{key}"
    else:
        root = Path(tfds_dir).expanduser()
    marker = root / _MARKER
    builder = tfds.builder("gigaword", data_dir=str(root))
    if builder.is_prepared():
        recorded = json.loads(marker.read_text()) if marker.exists() else {}
        if recorded.get("key") == key:
            return builder
        # Moved, copied or touched: the same data if the same bytes.
        digest = source.content_digest()
        if recorded.get("content") == digest:
            marker.write_text(json.dumps({**recorded, "key": key}))
            return builder
        previous = recorded.get("source", "another source")
        why = (
            " whose files have changed since"
            if previous == source.describe()
            else f", not {source.describe()}"
        )
        raise UserError(
            f"{root} already holds gigaword prepared from {previous}{why};"
            " pass another tfds_dir (or delete that one)"
        )

    counts = _validate(source)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gigaword-offline-", dir=root))
    manager_cls = _local_download_manager_cls()

    def make_download_manager(download_dir=None, download_config=None):
        del download_dir, download_config  # nothing is downloaded
        return manager_cls(
            source=source,
            staging_dir=work / "source",
            download_dir=work / "downloads",
            extract_dir=work / "extracted",
            dataset_name=builder.name,
        )

    # The one replaced step: the builder's `_split_generators` asks its
    # download manager for the extracted archive; ours returns the local copy.
    builder._make_download_manager = make_download_manager
    # Claim `root` for this source first: an interrupted preparation leaves no
    # prepared data, and the next call (same or other source) starts over.
    marker.write_text(
        json.dumps(
            {
                "key": key,
                "content": source.content_digest(),
                "source": source.describe(),
                "pairs": counts,
            }
        )
    )
    try:
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(try_download_gcs=False)
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)  # extracted copy, if any
    return builder


# ----------------------------------------------------------------------------
# Loading splits.


def _canonical_split(split: str, strict: bool) -> str:
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


def _tfds_builder(dataset: str, data_dir):
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


def _check_keys(builder, document_key: str, summary_key: str) -> None:
    features = builder.info.features
    text_keys = sorted(k for k in features.keys() if features[k].dtype == tf.string)
    for name, key in (("document_key", document_key), ("summary_key", summary_key)):
        if key not in text_keys:
            raise UserError(
                f"`{name}` must name a text feature of TFDS dataset "
                f"{builder.name!r} (available keys: {', '.join(text_keys)}). "
                f"Received: {name}={key!r}"
            )


def _as_pairs(builder, split: str, document_key: str, summary_key: str):
    available = list(builder.info.splits.keys())
    base = re.match(r"^\s*(\w+)", split)
    if available and base and base.group(1) not in available:
        raise UserError(
            f"`split` must be a split of TFDS dataset {builder.name!r}: "
            f"{', '.join(available)}. Received: split={split!r}"
        )
    ds = builder.as_dataset(split=split, shuffle_files=False)
    return ds.map(
        lambda ex: (ex[document_key], ex[summary_key]),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _text_pairs(source: _Source, split: str) -> tf.data.Dataset:
    """Pairs read straight from org_data files (no TFDS, no `<unk>` rewrite)."""
    if source.kind != "dir":
        raise UserError(
            "A zip archive is only read through the TFDS gigaword builder: "
            f"`dataset` must be 'gigaword'. Received: data_dir={source.path}"
        )
    if split not in SPLITS:
        raise UserError(
            f"`split` must be one of {', '.join(SPLITS)}. Received: split={split!r}"
        )
    _validate(source, [split])
    prefix = str(source.path / SPLIT_FILES[split])
    return tf.data.Dataset.zip(
        tf.data.TextLineDataset(prefix + ".src.txt"),
        tf.data.TextLineDataset(prefix + ".tgt.txt"),
    ).map(
        lambda d, s: (tf.strings.strip(d), tf.strings.strip(s)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def load_split(
    split: str,
    *,
    data_dir: str | os.PathLike | None = None,
    dataset: str = "gigaword",
    document_key: str = "document",
    summary_key: str = "summary",
    tfds_dir: str | os.PathLike | None = None,
) -> tf.data.Dataset:
    """Loads one split as `(document, summary)` pairs of `tf.string` scalars.

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
        data_dir: local data, as above.
        dataset: TFDS dataset name.
        document_key: feature holding the document.
        summary_key: feature holding the summary.
        tfds_dir: TFDS data dir for prepared data (default: TFDS's).

    Returns:
        `tf.data.Dataset` of `(document, summary)`, both `tf.string` with
        shape `()`: in TFDS's (fixed, hashed) order when read through TFDS, in
        file order when read from plain text files.

    Raises:
        UserError: missing or invalid data, unknown dataset, split or key.
    """
    gigaword = dataset == "gigaword"
    split = _canonical_split(split, strict=gigaword)
    if data_dir is None:
        builder = _tfds_builder(
            dataset, None if tfds_dir is None else os.fspath(tfds_dir)
        )
        _check_keys(builder, document_key, summary_key)
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
        return _as_pairs(builder, split, document_key, summary_key)

    path = Path(data_dir).expanduser()
    if _prepared_tfds_dir(path, dataset):
        builder = _tfds_builder(dataset, os.fspath(path))
        _check_keys(builder, document_key, summary_key)
        if not builder.is_prepared():
            raise UserError(f"{path} holds {dataset} but not version {builder.version}")
        return _as_pairs(builder, split, document_key, summary_key)
    if not gigaword:
        return _text_pairs(_find_source(path), split)
    # Check the keys against the builder's features before any preparation.
    _check_keys(_tfds_builder(dataset, None), document_key, summary_key)
    builder = prepare_offline(path, tfds_dir=tfds_dir)
    return _as_pairs(builder, split, document_key, summary_key)


# ----------------------------------------------------------------------------
# Batching.


def _default_length(*features) -> tf.Tensor:
    first = tf.nest.flatten(features)[0]
    return tf.shape(first, out_type=tf.int32)[0]


def make_batches(
    dataset: tf.data.Dataset,
    encode_fn: Callable | None = None,
    batch_size: int = 64,
    *,
    length_fn: Callable | None = None,
    bucket_boundaries: Sequence[int] = (16, 24, 32, 48, 64),
    bucket_batch_sizes: Sequence[int] | None = None,
    padded_shapes=None,
    padding_values=None,
    shuffle: bool = True,
    shuffle_buffer: int = 10_000,
    seed: int | None = None,
    cache: bool | str = True,
    drop_remainder: bool = False,
    repeat: bool = False,
) -> tf.data.Dataset:
    """Encodes, caches, shuffles, buckets by length, pads and prefetches.

    Order: `map(encode_fn)` (if given) -> `cache` -> `shuffle` (reshuffled
    each epoch) -> `repeat` -> `bucket_by_sequence_length` ->
    `prefetch(AUTOTUNE)`. Caching after encoding means the encoding runs once,
    not once per epoch.

    Args:
        dataset: elements `(document, summary)` (or anything `encode_fn`
            accepts as positional arguments).
        encode_fn: maps one element to model features: tensors or a nested
            structure of tensors with a leading time axis (e.g.
            `({"source": ids[S], "target_in": ids[T]}, ids[T])`). Runs in-graph
            under `Dataset.map`. `None`: the elements are already encoded.
        batch_size: examples per batch (in every bucket unless
            `bucket_batch_sizes` is given).
        length_fn: maps the encoded features (as `encode_fn` returned them,
            unpacked if a tuple) to an `int32` scalar used for bucketing.
            Default: the length of the first dimension of the first flattened
            feature.
        bucket_boundaries: increasing upper length bounds (exclusive) of the
            buckets; `len(bucket_boundaries) + 1` buckets.
        bucket_batch_sizes: batch size per bucket, `len(bucket_boundaries) + 1`
            entries (e.g. smaller batches for long examples).
        padded_shapes: as in `padded_batch` (default: pad every axis to the
            longest in the batch).
        padding_values: as in `padded_batch` (default: 0 / b"").
        shuffle: shuffle examples (files are read in order).
        shuffle_buffer: shuffle buffer size.
        seed: shuffle seed, for reproducible order.
        cache: `True` caches in memory, a string caches to that file path,
            `False` does not cache.
        drop_remainder: drop each bucket's last, smaller batch.
        repeat: repeat indefinitely (after caching and shuffling).

    Returns:
        `tf.data.Dataset` of padded batches.
    """
    boundaries = [int(b) for b in bucket_boundaries]
    if (
        not boundaries
        or any(b <= 0 for b in boundaries)
        or sorted(set(boundaries)) != (boundaries)
    ):
        raise ValueError(
            "`bucket_boundaries` must be strictly increasing positive ints, "
            f"received: {tuple(bucket_boundaries)}"
        )
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, received: {batch_size}")
    if bucket_batch_sizes is None:
        bucket_batch_sizes = [batch_size] * (len(boundaries) + 1)
    elif len(bucket_batch_sizes) != len(boundaries) + 1:
        raise ValueError(
            "`bucket_batch_sizes` needs len(bucket_boundaries) + 1 = "
            f"{len(boundaries) + 1} entries, received: {len(bucket_batch_sizes)}"
        )
    ds = dataset
    if encode_fn is not None:
        ds = ds.map(lambda *args: encode_fn(*args), num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        ds = ds.cache(cache if isinstance(cache, str) else "")
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    length_fn = length_fn or _default_length
    ds = ds.bucket_by_sequence_length(
        element_length_func=length_fn,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=list(bucket_batch_sizes),
        padded_shapes=padded_shapes,
        padding_values=padding_values,
        drop_remainder=drop_remainder,
    )
    return ds.prefetch(tf.data.AUTOTUNE)
