"""`benchmarks.full_size_archive`: the layout, the counts, the seed, the growth.

Plain Python and numpy: runs on every backend.
"""

import json

from benchmarks import full_size_archive as archive

# Made-up pairs in the Gigaword form (never lines of the real data).
SOURCES = [
    "the mayor of springfield opened a bridge over the river on monday .",
    "shares of acme rose #.# percent to ##.## dollars in early trading .",
    "a <unk> storm hit the coast of norway , killing ## people .",
    "the minister said talks with the union would resume next week .",
    "police arrested ### protesters outside the parliament in oslo .",
]
HEADLINES = [
    "springfield opens bridge",
    "acme shares up #.# percent",
    "storm kills ## in norway",
    "talks to resume next week",
    "### arrested in oslo",
]


def write_sample(root):
    org = root / "org_data"
    org.mkdir(parents=True)
    for prefix, rows in (("train", 5), ("dev", 3), ("test", 2)):
        (org / f"{prefix}.src.txt").write_text("\n".join(SOURCES[:rows]) + "\n")
        (org / f"{prefix}.tgt.txt").write_text("\n".join(HEADLINES[:rows]) + "\n")
    return root


def lines(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


SIZES = {"train": 203, "dev": 17, "test": 2}


def test_the_archive_has_the_layout_and_the_counts_asked_for(tmp_path):
    sample = write_sample(tmp_path / "sample")
    out = tmp_path / "out"
    manifest = archive.write_archive(
        out, sample, SIZES, seed=3, chunk=50, progress=False
    )
    org = out / "org_data"
    assert sorted(p.name for p in org.iterdir()) == sorted(
        f"{prefix}.{side}.txt" for prefix in SIZES for side in ("src", "tgt")
    )
    for prefix, pairs in SIZES.items():
        for side in ("src", "tgt"):
            rows = lines(org / f"{prefix}.{side}.txt")
            assert len(rows) == pairs, (prefix, side)
            assert all(r.strip() and r == " ".join(r.split()) for r in rows)
    assert manifest["pairs"] == SIZES
    assert json.loads((out / archive.MANIFEST).read_text())["pairs"] == SIZES
    assert manifest["bytes"] == sum(p.stat().st_size for p in org.iterdir())


def test_the_archive_is_a_function_of_its_seed(tmp_path):
    sample = write_sample(tmp_path / "sample")
    texts = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        archive.write_archive(
            tmp_path / name, sample, SIZES, seed=seed, chunk=64, progress=False
        )
        texts[name] = (tmp_path / name / "org_data" / "train.src.txt").read_text()
    assert texts["a"] == texts["b"]
    assert texts["a"] != texts["c"]


def test_pairs_are_perturbed_and_the_vocabulary_grows(tmp_path):
    sample = write_sample(tmp_path / "sample")
    sample_words = {w for s in SOURCES + HEADLINES for w in s.split()}
    archive.write_archive(
        tmp_path / "out", sample, SIZES, seed=0, progress=False, common_words=12
    )
    rows = lines(tmp_path / "out" / "org_data" / "train.src.txt")
    # 203 pairs from 5 sources: far more distinct lines than the sample has,
    # and words the sample never had (made-up names).
    assert len(set(rows)) > 100
    words = {w for r in rows for w in r.split()}
    assert len(words - sample_words) > 50
    # The most frequent words are kept: the sources still read like the sample.
    assert all("the" in r.split() or "." in r.split() for r in rows[:50])


def test_a_finished_archive_is_found_not_rewritten(tmp_path):
    sample = write_sample(tmp_path / "sample")
    out = tmp_path / "out"
    archive.write_archive(out, sample, SIZES, seed=0, progress=False)
    train = out / "org_data" / "train.src.txt"
    train.write_text("kept\n")
    archive.write_archive(out, sample, SIZES, seed=0, progress=False)
    assert train.read_text() == "kept\n"
    archive.write_archive(out, sample, SIZES, seed=5, progress=False)
    assert len(lines(train)) == SIZES["train"]


def test_made_up_words_are_distinct():
    words = [archive.made_up_word(k) for k in range(20_000)]
    assert len(set(words)) == len(words)
    assert all(len(w) >= 4 and w.isalpha() for w in words)
