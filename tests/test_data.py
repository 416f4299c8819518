"""Tests for `models.data`: offline TFDS preparation, validation, batching."""

import pytest

pytestmark = pytest.mark.tf_only

import os  # noqa: E402
import zipfile  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from models import data, text  # noqa: E402
from models.settings.data import DataSource  # noqa: E402
from models.settings.errors import UserError  # noqa: E402

# Tiny made-up pairs in the Gigaword form (never lines of the real data).
PAIRS = {
    "train": [
        ("the cat sat on the mat .", "cat sits"),
        ("a <unk> dog barked at #### people .", "dog barks"),
        ("stocks rose #.# percent on monday .", "stocks up"),
    ],
    "dev": [("rain fell in the north .", "rain falls"), ("x y z .", "x y")],
    "test": [("the <unk> won the cup .", "<unk> wins"), ("prices fell .", "fall")],
}


def write_org_data(root, pairs=PAIRS):
    org = root / "org_data"
    org.mkdir(parents=True)
    for prefix, rows in pairs.items():
        (org / f"{prefix}.src.txt").write_text("".join(d + "\n" for d, _ in rows))
        (org / f"{prefix}.tgt.txt").write_text("".join(s + "\n" for _, s in rows))
    return org


def write_zip(path, org, inner="org_data"):
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for f in sorted(org.iterdir()):
            zf.write(f, f"{inner}/{f.name}")
    return path


def as_set(ds):
    return {(d.decode(), s.decode()) for d, s in ds.as_numpy_iterator()}


def expected(prefix, rewrite):
    rows = PAIRS[prefix]
    if rewrite:  # the TFDS builder's `<unk>` -> `UNK` in train and validation
        rows = [(d.replace("<unk>", "UNK"), s.replace("<unk>", "UNK")) for d, s in rows]
    return set(rows)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """An org_data folder and the TFDS dir it was prepared into (once)."""
    root = tmp_path_factory.mktemp("gigaword")
    org = write_org_data(root / "src")
    tfds_dir = root / "tfds"
    ds = data.load_split("train", DataSource(data_dir=org, tfds_dir=tfds_dir))
    return org, tfds_dir, ds


def test_org_data_folder_prepares_tfds_gigaword(prepared):
    org, tfds_dir, train = prepared
    assert train.element_spec == (
        tf.TensorSpec((), tf.string),
        tf.TensorSpec((), tf.string),
    )
    assert as_set(train) == expected("train", rewrite=True)
    # The parent folder and the `dev` alias reach the same prepared dataset.
    validation = data.load_split(
        "dev", DataSource(data_dir=org.parent, tfds_dir=tfds_dir)
    )
    assert as_set(validation) == expected("dev", rewrite=True)
    test = data.load_split("test", DataSource(data_dir=org, tfds_dir=tfds_dir))
    assert as_set(test) == expected("test", rewrite=False)  # builder keeps <unk>
    # A real TFDS `gigaword` dataset, readable by TFDS itself.
    assert (tfds_dir / "gigaword" / "1.2.0" / "dataset_info.json").exists()
    import tensorflow_datasets as tfds

    ds = tfds.load("gigaword", split="test", data_dir=str(tfds_dir), download=False)
    assert int(ds.cardinality()) == len(PAIRS["test"])
    # ... which load_split also reads as a prepared TFDS data dir.
    again = data.load_split("validation", DataSource(data_dir=tfds_dir))
    assert as_set(again) == expected("dev", rewrite=True)


def test_tfds_dir_holding_another_source_is_refused(prepared, tmp_path):
    _, tfds_dir, _ = prepared
    other = write_org_data(tmp_path, {k: v[:1] for k, v in PAIRS.items()})
    with pytest.raises(UserError, match="already holds gigaword prepared from"):
        data.load_split("train", DataSource(data_dir=other, tfds_dir=tfds_dir))


def test_touched_source_is_reused_and_changed_source_refused(tmp_path):
    small = {k: v[:1] for k, v in PAIRS.items()}
    org = write_org_data(tmp_path / "src", small)
    tfds_dir = tmp_path / "tfds"
    data.load_split("test", DataSource(data_dir=org, tfds_dir=tfds_dir))
    changed = org / "test.src.txt"
    # New modification time, same bytes (a re-copied dataset): reused.
    os.utime(changed, ns=(0, changed.stat().st_mtime_ns + 10**9))
    ds = data.load_split("test", DataSource(data_dir=org, tfds_dir=tfds_dir))
    assert as_set(ds) == set(small["test"])
    changed.write_text("a different document\n")
    with pytest.raises(UserError, match="whose files have changed since"):
        data.load_split("test", DataSource(data_dir=org, tfds_dir=tfds_dir))


def test_a_second_preparation_waits_for_the_first(tmp_path):
    # Two runs started at once: the second must not write beside the first
    # (it failed on the first's half-written files), then it reads the data.
    import threading

    from models.data import offline

    org = write_org_data(tmp_path / "src")
    tfds_dir = tmp_path / "tfds"
    tfds_dir.mkdir()
    result = {}

    def second():
        result["train"] = as_set(
            data.load_split("train", DataSource(data_dir=org, tfds_dir=tfds_dir))
        )

    with offline.preparation_lock(tfds_dir):  # the first run
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=3)
        assert thread.is_alive()
        assert not (tfds_dir / "gigaword").exists()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert result["train"] == expected("train", rewrite=True)


def test_zip_archive_and_manual_dir(tmp_path):
    org = write_org_data(tmp_path / "src")
    archive = write_zip(tmp_path / "manual" / "ggw_data.zip", org)
    tfds_dir = tmp_path / "tfds"
    ds = data.load_split("validation", DataSource(data_dir=archive, tfds_dir=tfds_dir))
    assert as_set(ds) == expected("dev", rewrite=True)
    # TFDS's manual-dir convention: the folder holding `ggw_data.zip`.
    ds = data.load_split("test", DataSource(data_dir=archive.parent, tfds_dir=tfds_dir))
    assert as_set(ds) == expected("test", rewrite=False)
    assert not list(tfds_dir.glob("gigaword-offline-*"))  # extraction cleaned up


def test_nested_zip_and_plain_folder(tmp_path):
    org = write_org_data(tmp_path / "src")
    archive = write_zip(tmp_path / "data.zip", org, inner="ggw_data/org_data")
    ds = data.load_split(
        "train", DataSource(data_dir=archive, tfds_dir=tmp_path / "tfds")
    )
    assert as_set(ds) == expected("train", rewrite=True)
    # Any other dataset name: the org_data files as they are, in file order.
    plain = data.load_split("dev", DataSource(data_dir=org, dataset="my_pairs"))
    assert [(d.decode(), s.decode()) for d, s in plain.as_numpy_iterator()] == (
        PAIRS["dev"]
    )


def _break(org, name, content):
    (org / name).write_bytes(content)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda org: (org / "test.tgt.txt").unlink(), r"missing file .*test\.tgt\.txt"),
        (
            lambda org: _break(org, "dev.tgt.txt", b"one\n"),
            r"line counts differ for split 'validation': \S+dev\.src\.txt has 2 "
            r"lines, \S+dev\.tgt\.txt has 1",
        ),
        (
            lambda org: _break(org, "train.src.txt", b"a .\n\nb .\n"),
            r"train\.src\.txt line 2: empty line",
        ),
        (
            lambda org: _break(org, "dev.src.txt", b"ok .\ncaf\xe9 .\n"),
            r"dev\.src\.txt line 2: not UTF-8 \(byte b'\\xe9' at column 4\)",
        ),
        (lambda org: _break(org, "test.src.txt", b""), r"test\.src\.txt is empty"),
    ],
    ids=["missing", "counts", "empty-line", "not-utf8", "empty-file"],
)
def test_bad_files_raise_one_line_errors(tmp_path, corrupt, message):
    org = write_org_data(tmp_path)
    corrupt(org)
    with pytest.raises(UserError, match=message) as info:
        data.load_split("train", DataSource(data_dir=org, tfds_dir=tmp_path / "tfds"))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "tfds" / "gigaword").exists()  # validated first


def test_bad_zip_is_validated_too(tmp_path):
    org = write_org_data(tmp_path / "src")
    _break(org, "train.tgt.txt", b"a\n")
    archive = write_zip(tmp_path / "ggw_data.zip", org)
    with pytest.raises(
        UserError, match=r"ggw_data\.zip:org_data/train\.src\.txt has 3"
    ):
        data.load_split(
            "train", DataSource(data_dir=archive, tfds_dir=tmp_path / "tfds")
        )


@pytest.mark.parametrize(
    "make, kwargs, message",
    [
        (lambda p: p / "nowhere", {}, "`data_dir` must exist"),
        (lambda p: p, {}, "`data_dir` must hold Gigaword data"),
        (
            lambda p: (p / "notes.txt", (p / "notes.txt").write_text("hi"))[0],
            {},
            "a file but not a zip archive",
        ),
        (
            lambda p: write_zip(p / "x.zip", write_org_data(p / "s"), inner="other"),
            {},
            r"must hold org_data/train\.src\.txt",
        ),
        (None, {"dataset": "gigawordd"}, r"\(did you mean .*dataset='gigawordd'"),
        (
            lambda p: write_org_data(p),
            {"document_key": "article"},
            r"keys: document, summary\)\. Received: document_key='article'",
        ),
        (lambda p: write_org_data(p), {"split": "training"}, "`split` must be one of"),
    ],
    ids=[
        "missing-dir",
        "empty-dir",
        "not-zip",
        "zip-layout",
        "dataset",
        "key",
        "split",
    ],
)
def test_bad_arguments_raise_one_line_errors(tmp_path, make, kwargs, message):
    split = kwargs.pop("split", "train")
    if make is not None:
        kwargs["data_dir"] = make(tmp_path)
    with pytest.raises(UserError, match=message) as info:
        data.load_split(split, DataSource(tfds_dir=tmp_path / "tfds", **kwargs))
    assert "\n" not in str(info.value)


def test_make_batches_buckets_by_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=200)
    docs = [" ".join(["w"] * n) for n in lengths]
    ds = tf.data.Dataset.from_tensor_slices((docs, ["h"] * len(docs)))

    def encode(document, summary):
        return tf.strings.split(document), tf.strings.split(summary)

    boundaries = (8, 16, 32)
    batches = data.make_batches(
        ds, encode, batch_size=16, bucket_boundaries=boundaries, seed=1
    )
    edges = (0, *boundaries, 1000)
    seen = []
    for source, target in batches.as_numpy_iterator():
        assert source.shape[0] <= 16 and target.shape[0] == source.shape[0]
        true_lengths = (source != b"").sum(axis=1)
        assert source.shape[1] == true_lengths.max()  # padded to the longest
        bucket = np.searchsorted(edges, true_lengths, side="right")
        assert len(set(bucket)) == 1, true_lengths  # one bucket per batch
        seen += true_lengths.tolist()
    assert sorted(seen) == sorted(lengths.tolist())
    assert seen != lengths.tolist()  # shuffled

    def first_epoch():
        rebuilt = data.make_batches(
            ds, encode, batch_size=16, bucket_boundaries=boundaries, seed=1
        )
        return [(s != b"").sum(axis=1).tolist() for s, _ in rebuilt.as_numpy_iterator()]

    assert first_epoch() == first_epoch()  # seeded: reproducible


def test_make_batches_pre_encoded_with_length_fn():
    ids = [[1] * n for n in (3, 5, 9, 12)]
    ds = tf.data.Dataset.from_generator(
        lambda: iter(ids), output_signature=tf.TensorSpec([None], tf.int32)
    ).map(lambda x: ({"source_ids": x}, x[:2]))
    batches = data.make_batches(
        ds,
        batch_size=4,
        length_fn=lambda inputs, target: tf.shape(inputs["source_ids"])[0],
        bucket_boundaries=(6,),
        shuffle=False,
        cache=False,
    )
    shapes = sorted(b[0]["source_ids"].shape for b in batches.as_numpy_iterator())
    assert shapes == [(2, 5), (2, 12)]
    with pytest.raises(ValueError, match="strictly increasing"):
        data.make_batches(ds, batch_size=4, bucket_boundaries=(8, 4))


def _encoded_examples(count, seed=0):
    """`count` examples as `encode_dataset` makes them: source ids of 3 to
    70 tokens (every length bucket), each example's ids starting with its
    index, so that a batch's first column names its examples."""
    lengths = np.random.default_rng(seed).integers(3, 70, size=count)

    def example(index, length):
        ids = tf.range(length, dtype=tf.int32) + tf.cast(index, tf.int32) * 1000
        return {"source_ids": ids}, ids[:2]

    pairs = tf.data.Dataset.zip(
        tf.data.Dataset.range(count), tf.data.Dataset.from_tensor_slices(lengths)
    )
    return pairs.map(example)


def _firsts(batches, count):
    return [b[0]["source_ids"][:, 0].numpy().tolist() for b in batches.take(count)]


@pytest.mark.parametrize("graph_seed", [0, 7])
def test_the_stream_is_its_passes_one_after_another_from_any_batch(graph_seed):
    """The stream reads pass after pass, each exactly as `pass_batches` makes
    it on its own, and started at `(pass, batch)` it reads the same batches
    as from the start: in the middle of a pass too. With the graph-level
    seed 0 (a run's seed 0) and another."""
    tf.random.set_seed(graph_seed)
    cached = _encoded_examples(700).cache()
    passes = [
        data.pass_batches(cached, 16, seed=3, index=p, max_source_length=64)
        for p in range(3)
    ]
    size = data.count_batches(passes[0])
    assert [data.count_batches(p) for p in passes] == [size] * 3
    expected = [row for p in passes for row in _firsts(p, size)]
    # Each pass holds every example once, in its own order.
    first, second = expected[:size], expected[size : 2 * size]
    assert (
        sorted(sum(first, []))
        == sorted(sum(second, []))
        == [i * 1000 for i in range(700)]
    )
    assert first != second
    stream = data.stream_batches(cached, 16, seed=3, max_source_length=64)
    assert _firsts(stream, 3 * size) == expected
    for start in ((0, 5), (1, 0), (1, size - 1)):
        at = start[0] * size + start[1]
        resumed = data.stream_batches(
            cached, 16, seed=3, max_source_length=64, start=start
        )
        assert _firsts(resumed, 3 * size - at) == expected[at:]
    # Another seed, another order.
    other = data.stream_batches(cached, 16, seed=4, max_source_length=64)
    assert _firsts(other, size) != expected[:size]


def test_count_words_counts_every_token_of_both_sides():
    pairs = [
        ("the cat sat on the mat .", "cat sits"),
        ("a <unk> dog barked at 1,500 people .", "dog barks at people"),
        ("Écoles : 12 élèves , le chat .", "le chat"),
    ] * 700  # three batches of 1024 pairs, the last one partial
    ds = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*pairs, strict=True))))
    expected = {}
    for document, summary in pairs[:3]:
        for column in (document, summary):
            for word in text.tokenize(tf.constant([column])).to_list()[0]:
                key = word.decode()
                expected[key] = expected.get(key, 0) + 700
    assert data.count_words(ds) == expected
    assert expected["the"] == 1400 and expected["chat"] == 1400
    assert all(isinstance(w, str) for w in expected)


def test_plain_text_pairs_and_their_encoding_know_their_count(tmp_path):
    org = write_org_data(tmp_path / "src")
    pairs = data.load_split("train", DataSource(data_dir=org, dataset="plain"))
    assert int(pairs.cardinality()) == len(PAIRS["train"])
    # The pairs' count goes through encoding, which unbatches.
    from models.model.run_folder import make_features
    from models.settings.model import SummarizerConfig

    vocabulary = data.split_vocabulary(pairs, 100, min_count=1)
    config = SummarizerConfig(
        vocab_size=len(vocabulary),
        max_source_length=64,
        max_target_length=20,
        normalization="gigaword",
    )
    features = make_features(vocabulary, config)
    encoded = data.encode_dataset(pairs, features)
    assert int(encoded.cardinality()) == len(PAIRS["train"])
    assert len(list(encoded)) == len(PAIRS["train"])
    filtered = pairs.filter(lambda d, s: True)  # a count no one knows
    assert int(data.encode_dataset(filtered, features).cardinality()) < 0


def _encoded(n):
    """`n` made-up encoded examples of lengths 1..30 (known count)."""

    def example(i):
        source = tf.fill([i % 30 + 1], tf.cast(i, tf.int32) + 1)
        target = tf.fill([i % 5 + 1], tf.cast(i, tf.int32) + 1)
        inputs = {"source_ids": source, "source_ext_ids": source, "target_in": target}
        return inputs, target

    return tf.data.Dataset.range(n).map(example)


def test_a_large_split_is_kept_on_disk_a_small_one_in_memory(tmp_path, monkeypatch):
    from models.data import examples

    assert data.training_cache(_encoded(500), tmp_path) is None
    unknown = _encoded(500).filter(lambda inputs, target: True)
    monkeypatch.setattr(examples, "MEMORY_CACHE_EXAMPLES", 100)
    assert data.training_cache(unknown, tmp_path) is None
    path = data.training_cache(_encoded(500), tmp_path)
    assert path == str(tmp_path / "training-examples-500")
    assert data.training_cache(_encoded(400), tmp_path).endswith("-400")


def _batches(folder):
    cached = data.cached_examples(_encoded(500), folder)
    steps = data.count_batches(
        data.pass_batches(cached, 16, seed=3, index=0, max_source_length=64)
    )
    stream = data.stream_batches(cached, 16, seed=3, max_source_length=64)
    return [t.tolist() for _, t in stream.take(2 * steps).as_numpy_iterator()], steps


def test_examples_on_disk_give_the_batches_of_the_memory_cache(tmp_path, monkeypatch):
    from models.data import examples

    path = tmp_path / "training-examples-500"
    # What a pass killed half-way left: written again, whole.
    (tmp_path / "training-examples-500.partial").mkdir()
    (tmp_path / "training-examples-500.partial" / "junk").write_text("x")
    in_memory, steps = _batches(tmp_path)  # 500 examples: in memory
    monkeypatch.setattr(examples, "MEMORY_CACHE_EXAMPLES", 100)
    on_disk, disk_steps = _batches(tmp_path)
    assert (on_disk, disk_steps) == (in_memory, steps)
    assert steps > 500 // 16 and len(in_memory) == 2 * steps
    assert path.is_dir() and not (tmp_path / "training-examples-500.partial").exists()
    # Written once: a second run reads the folder as it is.
    written = {p: p.stat().st_mtime_ns for p in path.rglob("*")}
    assert _batches(tmp_path) == (in_memory, steps)
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == written
