"""Offline preparation of the TFDS `gigaword` dataset from a local copy.

The installed TFDS `gigaword` builder prepares the dataset with its own split
generation and example code (including its `<unk>` -> `UNK` rewrite in train
and validation). Only the download step is replaced, by a download manager
that resolves the builder's URL to the local copy. The prepared TFRecords go
to a TFDS data dir (by default `$TFDS_DATA_DIR` or `~/tensorflow_datasets`,
under `offline/gigaword-<key>`, one per source, so that they never shadow the
full online dataset).
"""

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock (one preparation at a time there)
    fcntl = None

from models.data.sources import ORG_DATA, find_source, validate
from models.settings.errors import UserError
from models.settings.json_files import read_json, write_json

_MARKER = "gigaword_offline_source.json"
_LOCK = ".gigaword_offline.lock"


def _default_tfds_root():
    return Path(os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")).expanduser()


def _local_download_manager_cls():
    import tensorflow_datasets as tfds

    class LocalSourceDownloadManager(tfds.download.DownloadManager):
        """Download manager that resolves every URL to a local copy.

        `download_and_extract(url)` returns a folder with `org_data/` inside, as
        the real download+extraction of `ggw_data.zip` would; a zip archive is
        extracted with TFDS's own extractor. Nothing is fetched from the network.
        """

        def __init__(self, *, source, staging_dir, **kwargs):
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
    data_dir,
    *,
    tfds_dir=None,
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
    source = find_source(data_dir)
    key = source.fingerprint()
    if tfds_dir is None:
        root = _default_tfds_root() / "offline" / f"gigaword-{key}"
    else:
        root = Path(tfds_dir).expanduser()
    # Two runs started at once on a fresh machine would both prepare into
    # `root` and one would fail on the other's half-written files: the
    # second waits for the first, then finds the dataset prepared.
    root.mkdir(parents=True, exist_ok=True)
    with preparation_lock(root):
        return _prepare(source, key, root)


@contextlib.contextmanager
def preparation_lock(root):
    """Holds the lock that preparing into the TFDS data dir `root` takes.

    A file in `root` is locked exclusively while inside; a second
    preparation into `root` waits until the holder leaves.
    """
    if fcntl is None:
        yield
        return
    with open(Path(root) / _LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prepare(source, key, root):
    """`prepare_offline` once `root` is locked."""
    import tensorflow_datasets as tfds

    marker = root / _MARKER
    builder = tfds.builder("gigaword", data_dir=str(root))
    if builder.is_prepared():
        recorded = read_json(marker, default={})
        if recorded.get("key") == key:
            return builder
        # Moved, copied or touched: the same data if the same bytes.
        digest = source.content_digest()
        if recorded.get("content") == digest:
            write_json(marker, {**recorded, "key": key}, indent=None)
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

    counts = validate(source)
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
    write_json(
        marker,
        {
            "key": key,
            "content": source.content_digest(),
            "source": source.describe(),
            "pairs": counts,
        },
        indent=None,
    )
    # Minutes for the full dataset: say what is happening, and for how long.
    print(
        f"Preparing the TFDS gigaword dataset from {source.describe()} "
        f"({', '.join(f'{n:,} {s}' for s, n in counts.items())} pairs) in {root}",
        file=sys.stderr,
        flush=True,
    )
    start = time.monotonic()
    try:
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(try_download_gcs=False)
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)  # extracted copy, if any
    print(
        f"Prepared gigaword in {(time.monotonic() - start) / 60:.1f} min",
        file=sys.stderr,
        flush=True,
    )
    return builder
