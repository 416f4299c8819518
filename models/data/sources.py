"""Local copies of the Gigaword download: finding, fingerprinting, validating.

A copy is the `org_data/` folder of `ggw_data.zip` (or the six files in any
folder), or the archive itself. Plain Python (no TensorFlow), so that a bad
folder is reported before any framework loads.
"""

import dataclasses
import hashlib
import os
import zipfile
from pathlib import Path

from models.settings.data import SPLITS
from models.settings.errors import UserError

# TFDS split name -> file prefix in org_data/ (the builder's own mapping).
SPLIT_FILES = {"train": "train", "validation": "dev", "test": "test"}
ARCHIVE_NAME = "ggw_data.zip"  # file name in TFDS's url_checksums/gigaword.txt
ORG_DATA = "org_data"


@dataclasses.dataclass(frozen=True)
class Source:
    """A local copy of the gigaword download.

    `kind` is "dir" (`path` is the folder holding the six text files) or "zip"
    (`path` is the archive, `prefix` the member folder holding the files).
    """

    kind: str
    path: Path
    prefix: str = ""

    def file_names(self):
        return [
            f"{SPLIT_FILES[s]}.{side}.txt" for s in SPLITS for side in ("src", "tgt")
        ]

    def _paths(self):
        if self.kind == "zip":
            paths = [self.path]
        else:
            paths = [self.path / name for name in self.file_names()]
        for p in paths:
            if not p.is_file():
                raise UserError(f"missing file (or not a file): {p}")
        return paths

    def fingerprint(self):
        """Cheap identity of the source: path, sizes and modification times."""
        h = hashlib.sha256(f"{self.kind}:{self.path.resolve()}:{self.prefix}".encode())
        for p in self._paths():
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()[:12]

    def content_digest(self):
        """What the files hold, wherever they are and whenever written: for
        when `fingerprint` changed because they were copied or touched."""
        h = hashlib.sha256(self.prefix.encode())
        for p in self._paths():
            h.update(p.name.encode())
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        return h.hexdigest()

    def describe(self):
        return f"{self.path.resolve()}" + (
            f" ({self.prefix or '.'} in archive)" if self.prefix else ""
        )


def _is_org_data_dir(path):
    return path.is_dir() and any(
        (path / f"{prefix}.src.txt").exists() for prefix in SPLIT_FILES.values()
    )


def _zip_source(path):
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError(f"cannot read zip archive {path}: {e}") from None
    # The TFDS builder reads `<extracted>/org_data/*.txt`; accept the folder at
    # any depth (e.g. `ggw_data/org_data/`) and hand the builder its parent.
    for name in sorted(names, key=len):
        if name.endswith(f"{ORG_DATA}/train.src.txt"):
            return Source("zip", path, name[: -len("train.src.txt")])
    raise UserError(
        f"A zip archive must hold {ORG_DATA}/train.src.txt. Received: {path} "
        f"(members: {', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})"
    )


def find_source(data_dir):
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
        return Source("dir", path)
    if _is_org_data_dir(path / ORG_DATA):
        return Source("dir", path / ORG_DATA)
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


def _check_lines(name, lines):
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


def validate(source, splits=SPLITS):
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
