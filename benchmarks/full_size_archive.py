"""An archive of Gigaword's real size and shape, made from the sample.

    python -m benchmarks.full_size_archive --out /work/fullsize \
        --sample ../shared/data/gigaword_sample

writes `org_data/{train,dev,test}.{src,tgt}.txt` with Gigaword's split sizes
(3,803,957 / 189,651 / 1,951 pairs), the layout `train.py --data-dir` reads,
for measuring what the full dataset costs (preparation, vocabulary, memory,
disk, examples/s), not what a model learns from it. Each pair is a pair of
the sample's split, perturbed:

- recombined: a share of sources join the head of one sample source to the
  tail of another, cut at the same fraction of each (lengths keep the
  sample's distribution);
- shuffled: a share of sources have their words moved within a window of a
  few positions;
- substituted: the `#` number masks and the words outside the sample's most
  frequent ones are replaced, with some probability, by other masks and by
  made-up words drawn from a Zipf law over a lexicon of `--lexicon` words,
  the same replacement in a pair's source and headline.

The made-up words make the vocabulary grow with the data as real text's does
(Heaps' law): Gigaword has about 120k words seen at least twice; the
defaults give the same order (the script prints the count at the end with
`--count-vocabulary`). Output is a function of `--seed` and the sample, and
is streamed to disk a chunk at a time; the sample is read, never copied. A
finished archive holds `archive.json` (sizes, seed, settings); a rerun with
the same settings finds it and returns at once.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

from models.settings.json_files import write_json

# Gigaword's split sizes (TFDS `gigaword` 1.2.0): org_data file prefix -> pairs.
GIGAWORD_PAIRS = {"train": 3_803_957, "dev": 189_651, "test": 1_951}
MANIFEST = "archive.json"
ORG_DATA = "org_data"

_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def made_up_word(k: int) -> str:
    """The `k`-th made-up word: at least two syllables, distinct for each `k`."""
    n = len(_SYLLABLES)
    k += n  # two syllables at least
    parts = []
    while k:
        k, r = divmod(k, n)
        parts.append(_SYLLABLES[r])
    return "".join(reversed(parts))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Split:
    """One split of the sample: its lines as token ids, flat, with offsets."""

    def __init__(self, words: dict[str, int], src_path: Path, tgt_path: Path):
        self.src, self.src_offsets = _read_ids(src_path, words)
        self.tgt, self.tgt_offsets = _read_ids(tgt_path, words)
        if len(self.src_offsets) != len(self.tgt_offsets):
            raise ValueError(
                f"`sample` must hold as many sources as headlines. Received: "
                f"{src_path} ({len(self.src_offsets) - 1} lines) and {tgt_path} "
                f"({len(self.tgt_offsets) - 1} lines)"
            )
        self.pairs = len(self.src_offsets) - 1


def _read_ids(path: Path, words: dict[str, int]):
    ids, offsets = [], [0]
    with open(path, encoding="utf-8") as f:
        for line in f:
            tokens = line.split()
            if not tokens:
                raise ValueError(f"`sample` must have no empty line. Received: {path}")
            ids.extend(words.setdefault(w, len(words)) for w in tokens)
            offsets.append(len(ids))
    return np.asarray(ids, np.int64), np.asarray(offsets, np.int64)


def _gather(flat, starts, lengths):
    """`flat[starts[i]:starts[i]+lengths[i]]` for every i, concatenated."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return flat[np.arange(total) + shift], ends


class ArchiveMaker:
    """Perturbed pairs of a sample, a chunk at a time (see the module's text)."""

    def __init__(
        self,
        sample_dir: Path,
        *,
        seed: int = 0,
        lexicon: int = 90_000,
        zipf: float = 1.1,
        substitute: float = 0.3,
        numbers: float = 0.5,
        recombine: float = 0.3,
        shuffle: float = 0.5,
        window: int = 3,
        common_words: int = 300,
    ):
        org = sample_dir / ORG_DATA if (sample_dir / ORG_DATA).is_dir() else sample_dir
        words: dict[str, int] = {}
        self.splits = {
            name: _Split(words, org / f"{name}.src.txt", org / f"{name}.tgt.txt")
            for name in GIGAWORD_PAIRS
        }
        counts = np.bincount(
            np.concatenate([s.src for s in self.splits.values()]), minlength=len(words)
        )
        names = list(words)
        self.sample_words = len(names)
        self.table = np.asarray(
            names + [made_up_word(k) for k in range(lexicon)], dtype=object
        )
        is_number = np.array(["#" in w for w in names])
        keep = np.zeros(len(names), bool)
        keep[np.argsort(-counts, kind="stable")[:common_words]] = True
        for w in ("<unk>", "UNK"):
            if w in words:
                keep[words[w]] = True
        keep |= np.array([not any(ch.isalpha() for ch in w) for w in names])
        self.is_number = is_number
        self.is_content = ~keep & ~is_number
        # Number masks drawn by their frequency in the sample's sources.
        self.number_draws = np.repeat(
            np.flatnonzero(is_number), counts[is_number].astype(np.int64)
        )
        weights = np.arange(1, lexicon + 1, dtype=np.float64) ** -zipf
        self.zipf_cdf = np.cumsum(weights) / weights.sum()
        self.seed = int(seed)
        self.p = dict(substitute=substitute, numbers=numbers)
        self.recombine, self.shuffle, self.window = recombine, shuffle, int(window)

    def _order(self, split: _Split, code: int, first: int, count: int):
        """Sample pair of each output pair: a fresh permutation every round."""
        index = np.arange(first, first + count)
        rounds, pos = np.divmod(index, split.pairs)
        out = np.empty(count, np.int64)
        for r in np.unique(rounds):
            perm = np.random.default_rng([self.seed, code, int(r)]).permutation(
                split.pairs
            )
            at = rounds == r
            out[at] = perm[pos[at]]
        return out

    def _substitute(self, ids, line, pair_key):
        """Replaces numbers and content words, the same way within a pair."""
        h = _mix(
            (pair_key[line] * np.uint64(0x9E3779B97F4A7C15))
            ^ (ids.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93))
        )
        u = (h >> np.uint64(11)).astype(np.float64) / 2.0**53
        h2 = _mix(h ^ np.uint64(0x5851F42D4C957F2D))
        u2 = (h2 >> np.uint64(11)).astype(np.float64) / 2.0**53
        out = ids.copy()
        sample_ids = ids < self.sample_words
        num = sample_ids & self.is_number[np.minimum(ids, self.sample_words - 1)]
        num &= u < self.p["numbers"]
        if len(self.number_draws):
            pick = (u2[num] * len(self.number_draws)).astype(np.int64)
            out[num] = self.number_draws[pick]
        word = sample_ids & self.is_content[np.minimum(ids, self.sample_words - 1)]
        word &= u < self.p["substitute"]
        out[word] = self.sample_words + np.searchsorted(self.zipf_cdf, u2[word])
        return out

    def chunk(self, name: str, first: int, count: int):
        """Output pairs `first .. first + count - 1` of split `name`: the
        source and headline lines as two strings, newline-terminated."""
        split, code = self.splits[name], list(GIGAWORD_PAIRS).index(name)
        rng = np.random.default_rng([self.seed, code, first, 1])
        a = self._order(split, code, first, count)
        b = rng.integers(0, split.pairs, count)
        la = split.src_offsets[a + 1] - split.src_offsets[a]
        lb = split.src_offsets[b + 1] - split.src_offsets[b]
        cut = rng.uniform(0.3, 0.7, count)
        joined = rng.random(count) < self.recombine
        head = np.where(joined, np.maximum(1, np.rint(cut * la)), la).astype(np.int64)
        tail_start = np.minimum(lb, np.rint(cut * lb).astype(np.int64))
        tail = np.where(joined, lb - tail_start, 0)
        starts = np.stack([split.src_offsets[a], split.src_offsets[b] + tail_start], 1)
        lengths = np.stack([head, tail], 1)
        src, src_ends = _gather(split.src, starts.ravel(), lengths.ravel())
        src_ends = src_ends[1::2]
        src_lines = np.repeat(np.arange(count), head + tail)
        # Words move within a window: sort each line by position + noise.
        moved = (rng.random(count) < self.shuffle)[src_lines]
        position = np.arange(len(src)) - np.repeat(src_ends - head - tail, head + tail)
        key = position + moved * rng.uniform(0, self.window, len(src))
        src = src[np.lexsort((key, src_lines))]
        tgt_lengths = split.tgt_offsets[a + 1] - split.tgt_offsets[a]
        tgt, tgt_ends = _gather(split.tgt, split.tgt_offsets[a], tgt_lengths)
        tgt_lines = np.repeat(np.arange(count), tgt_lengths)
        seed_key = _mix(np.array([self.seed, code], np.uint64))
        pair_key = _mix(
            (np.arange(first, first + count, dtype=np.uint64) ^ seed_key[0])
            + seed_key[1]
        )
        src = self._substitute(src, src_lines, pair_key)
        tgt = self._substitute(tgt, tgt_lines, pair_key)
        return self._text(src, src_ends), self._text(tgt, tgt_ends)

    def _text(self, ids, ends):
        parts = np.empty(2 * len(ids), dtype=object)
        parts[0::2] = self.table[ids]
        parts[1::2] = " "
        parts[2 * ends - 1] = "\n"
        return "".join(parts.tolist())


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        del n


def _bar(total, progress):
    if not progress:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="pair", unit_scale=True)


def write_archive(
    out: Path,
    sample: Path,
    sizes: dict[str, int] | None = None,
    *,
    seed: int = 0,
    chunk: int = 20_000,
    progress: bool = True,
    **settings,
) -> dict:
    """Writes the archive under `out/org_data/`; returns its manifest.

    Each file is written under a temporary name and renamed when whole, and
    the manifest last: an interrupted run leaves no archive that looks done.
    """
    sizes = dict(GIGAWORD_PAIRS if sizes is None else sizes)
    manifest = {"pairs": sizes, "seed": seed, "settings": settings}
    path = Path(out) / MANIFEST
    if path.exists() and json.loads(path.read_text()).get("pairs") == sizes:
        recorded = json.loads(path.read_text())
        if {k: recorded.get(k) for k in ("seed", "settings")} == {
            "seed": seed,
            "settings": settings,
        }:
            return recorded
    maker = ArchiveMaker(Path(sample), seed=seed, **settings)
    org = Path(out) / ORG_DATA
    org.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with _bar(sum(sizes.values()), progress) as bar:
        for name, total in sizes.items():
            files = [org / f"{name}.{side}.txt" for side in ("src", "tgt")]
            partial = [p.with_suffix(".txt.partial") for p in files]
            with open(partial[0], "w") as fs, open(partial[1], "w") as ft:
                for first in range(0, total, chunk):
                    count = min(chunk, total - first)
                    src, tgt = maker.chunk(name, first, count)
                    fs.write(src)
                    ft.write(tgt)
                    bar.update(count)
            for p, f in zip(partial, files, strict=True):
                p.replace(f)
    manifest["seconds"] = round(time.perf_counter() - start, 1)
    manifest["bytes"] = sum(p.stat().st_size for p in org.glob("*.txt"))
    write_json(path, manifest)
    return manifest


def count_vocabulary(org: Path, min_count: int = 2) -> dict:
    """Source tokens and words of the training split (split on spaces)."""
    counts: collections.Counter = collections.Counter()
    tokens = 0
    with open(org / "train.src.txt", encoding="utf-8") as f:
        for line in f:
            words = line.split()
            tokens += len(words)
            counts.update(words)
    with open(org / "train.tgt.txt", encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    return {
        "source_tokens": tokens,
        "words": len(counts),
        f"words_seen_{min_count}_times": sum(c >= min_count for c in counts.values()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="archive folder")
    parser.add_argument(
        "--sample",
        type=Path,
        default=Path("../shared/data/gigaword_sample"),
        help="the sample (its org_data/ folder or the folder holding it)",
    )
    for name, pairs in GIGAWORD_PAIRS.items():
        parser.add_argument(f"--{name}", type=int, default=pairs, help="pairs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lexicon", type=int, default=90_000, help="made-up words")
    parser.add_argument(
        "--count-vocabulary",
        action="store_true",
        help="count the training split's words afterwards",
    )
    args = parser.parse_args(argv)
    sizes = {name: getattr(args, name) for name in GIGAWORD_PAIRS}
    if min(sizes.values()) < 1:
        parser.error(f"every split needs at least one pair. Received: {sizes}")
    manifest = write_archive(
        args.out, args.sample, sizes, seed=args.seed, lexicon=args.lexicon
    )
    if args.count_vocabulary:
        manifest["vocabulary"] = count_vocabulary(args.out / ORG_DATA)
        write_json(args.out / MANIFEST, manifest)
    json.dump(manifest, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
