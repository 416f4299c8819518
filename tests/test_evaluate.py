import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from models.decoding.saved_model_client import decode_documents  # noqa: E402
from models.evaluation import evaluate as ev  # noqa: E402
from models.evaluation import heatmap  # noqa: E402
from models.evaluation.heatmap import attention_png_bytes, plot_attention  # noqa: E402
from models.scoring import metrics  # noqa: E402
from models.scoring.baselines import lead_baseline  # noqa: E402
from models.settings import version_folders  # noqa: E402
from models.settings.data import DataSource  # noqa: E402
from models.settings.errors import UserError  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Made-up pairs in the Gigaword style; the fake model's headline is the
# document's first 3 words, so the references below make its scores known.
DOCS = [
    "police arrest five protesters near the harbour on monday .",
    "the central bank raised interest rates by #.# percent on tuesday .",
    "us$ ## million aid package approved by lawmakers in the capital .",
    "heavy rain floods villages in the north , officials said .",
    "new champion wins the marathon in record time on sunday .",
]
REFS = [
    "police arrest five protesters",
    "central bank raises rates",
    "lawmakers approve aid package",
    "rain floods northern villages",
    "champion wins marathon",
]


# ---------------------------------------------------------------------------
# ROUGE and the baseline.


def test_rouge_identical_is_100():
    out = metrics.rouge_with_intervals(REFS, REFS, n_bootstrap=200)
    assert set(out) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    for value in out.values():
        assert value == {"f1": 100.0, "low": 100.0, "high": 100.0}


def test_rouge_disjoint_is_0():
    preds = ["alpha beta gamma", "delta epsilon", "zeta eta theta"]
    refs = ["one two three", "four five", "six seven eight"]
    out = metrics.rouge_with_intervals(preds, refs, n_bootstrap=200)
    for value in out.values():
        assert value == {"f1": 0.0, "low": 0.0, "high": 0.0}


def test_rouge_partial_overlap_by_hand():
    preds = ["police arrest five men", "rain floods"]
    refs = ["police arrest five protesters", "rain floods northern villages"]
    # Pair 1: 3 of 4 words shared (P = R = 3/4), 2 of 3 bigrams, LCS 3.
    # Pair 2: both words in the 4-word reference: F(P=1, R=1/2) = 2/3; its
    # one bigram among the reference's 3: F(1, 1/3) = 1/2; LCS 2.
    pairs = {"rouge1": (3 / 4, 2 / 3), "rouge2": (2 / 3, 1 / 2)}
    pairs["rougeL"] = pairs["rougeLsum"] = pairs["rouge1"]
    out = metrics.rouge_with_intervals(preds, refs, n_bootstrap=200)
    for metric, (first, second) in pairs.items():
        # Scores are rounded to 4 decimals.
        assert out[metric]["f1"] == pytest.approx(50 * (first + second), abs=5e-5)
        # A resample of two pairs scores between the worse and the better one.
        assert 100 * second - 5e-5 <= out[metric]["low"] <= out[metric]["f1"]
        assert out[metric]["f1"] <= out[metric]["high"] <= 100 * first + 5e-5


def test_rouge_intervals_contain_mean_and_are_seeded():
    preds = [" ".join(d.split()[:4]) for d in DOCS] * 4
    refs = REFS * 4
    a = metrics.rouge_with_intervals(preds, refs, n_bootstrap=500, seed=3)
    b = metrics.rouge_with_intervals(preds, refs, n_bootstrap=500, seed=3)
    c = metrics.rouge_with_intervals(preds, refs, n_bootstrap=500, seed=4)
    assert a == b
    assert a != c
    for value in a.values():
        assert 0.0 <= value["low"] <= value["f1"] <= value["high"] <= 100.0
    assert a["rouge1"]["low"] < a["rouge1"]["high"]
    # rouge-score stems: "raises" matches "raised"; the first pair is exact.
    assert a["rouge1"]["f1"] > a["rouge2"]["f1"] > 0


def test_mean_rouge_by_hand():
    # 2 of 4 unigrams shared (F1 1/2), 1 of 3 bigrams (F1 1/3), LCS "a b" (1/2).
    scores = metrics.mean_rouge(
        ["a b c d", "stocks rising"], ["a b x y", "stock rises"], ("rouge1", "rouge2")
    )
    # Second pair: the stemmer makes both words match (F1 1 and 1).
    assert scores["rouge1"] == pytest.approx(100 * (0.5 + 1.0) / 2)
    assert scores["rouge2"] == pytest.approx(100 * (1 / 3 + 1.0) / 2)
    per_example = metrics.rouge_scores(["a b c d"], ["a b x y"], ["rougeL"])
    assert per_example.shape == (1, 1) and per_example[0, 0] == pytest.approx(0.5)


def test_rouge_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="2 predictions and 1 references"):
        metrics.rouge_with_intervals(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        metrics.rouge_with_intervals([], [])


def test_lead_baseline():
    assert lead_baseline(["a b c d e f g h i j", "x y", ""]) == [
        "a b c d e f g h",
        "x y",
        "",
    ]
    assert lead_baseline(["a  b\tc d"], n_words=3) == ["a b c"]
    # A Chinese or Japanese character is a word, written as the text writes
    # it; a no-break space separates words as `str.split` says.
    assert lead_baseline(
        ["東京株式市場が上昇した。", "Tokyo 東京。NEC 株価", "a\u00a0b c"], n_words=4
    ) == ["東京株式", "Tokyo 東京。", "a b c"]
    assert lead_baseline(["ゲームです。500 B.C. から"], n_words=8) == [
        "ゲームです。500 B.C."
    ]


# ---------------------------------------------------------------------------
# Heatmaps.


def test_heatmap_trims_padding_and_writes_png(tmp_path):
    attention = np.zeros((3, 4), np.float32)
    attention[0, 0] = attention[1, 2] = 1.0
    # Weight on the padding row and column too: kept, they would change the
    # picture's shape and its colour scale.
    attention[2, :] = 0.5
    attention[:, 3] = 3.0
    source, headline = ["a", "us$", "c", ""], ["x", b"y", ""]
    padded = _pixels(attention_png_bytes(attention, source, headline))
    # The same heatmap drawn without padding: the 2 x 3 matrix and its words.
    unpadded = _pixels(attention_png_bytes(attention[:2, :3], source[:3], ["x", "y"]))
    assert _same_image(padded, unpadded)
    # The padding drawn as a word (a space) is another picture: the check
    # above sees a trim that does not happen.
    kept = _pixels(attention_png_bytes(attention, [*source[:3], " "], headline))
    assert not _same_image(padded, kept)
    path = plot_attention(
        attention,
        ["a", "b", "c", ""],
        ["x", "y", ""],
        tmp_path / "sub" / "h.png",
        title="t $ x",
    )
    with open(path, "rb") as f:
        written = f.read()
    expected = attention_png_bytes(
        attention[:2, :3], ["a", "b", "c"], ["x", "y"], title="t $ x"
    )
    assert _same_image(_pixels(written), _pixels(expected))
    with pytest.raises(ValueError, match=r"\[2, 4\].*\(3, 4\)"):
        attention_png_bytes(attention, ["a", "b", "c", ""], ["x", "y"])


# ---------------------------------------------------------------------------
# End to end through a fake SavedModel.


def _outputs(headlines, scores):
    # A stand-in for the readable form: the first word in brackets.
    readable = tf.strings.regex_replace(headlines, "^([a-z]+)", "<\\1>")
    return {"headlines": readable, "normalized_headlines": headlines, "scores": scores}


class _FakeHeadliner(tf.Module):
    """Headline = first 3 words (beam) or first 2 words (greedy)."""

    def _first(self, documents, n):
        words = tf.strings.split(documents)
        head = words[:, :n]
        headlines = tf.strings.reduce_join(head, axis=1, separator=" ")
        return words, head, headlines, -tf.cast(head.row_lengths(), tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, documents):
        _, _, headlines, scores = self._first(documents, 3)
        return _outputs(headlines, scores)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def greedy(self, documents):
        _, _, headlines, scores = self._first(documents, 2)
        return _outputs(headlines, scores)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def attention(self, documents):
        words, head, headlines, scores = self._first(documents, 3)
        source = words.to_tensor("")
        target = head.to_tensor("")
        # Headline word i attends to source word i; padding rows are zero.
        eye = tf.one_hot(tf.range(tf.shape(target)[1]), tf.shape(source)[1])
        rows = tf.cast(tf.not_equal(target, ""), tf.float32)[:, :, None]
        return {
            **_outputs(headlines, scores),
            "source_tokens": source,
            "source_words": tf.strings.upper(source),
            "headline_words": tf.strings.upper(target),
            "headline_tokens": target,
            "attention": eye[None] * rows,
        }


def _pixels(png):
    """The RGBA pixels of PNG bytes."""
    import io

    from matplotlib import image

    assert png[:8] == PNG_MAGIC
    return image.imread(io.BytesIO(png), format="png")


def _fake_heatmap(doc, title):
    """`_FakeHeadliner`'s heatmap of `doc`, worked out here: headline word i
    (the first 3, upper-cased, as the labels) attends to source word i."""
    words = [w.upper() for w in doc.split()]
    attention = np.eye(3, len(words), dtype=np.float32)
    return _pixels(attention_png_bytes(attention, words, words[:3], title=title))


def _same_image(a, b):
    return a.shape == b.shape and np.array_equal(a, b)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved_models") / "m"
    module = _FakeHeadliner()
    tf.saved_model.save(
        module,
        str(root / "1"),
        signatures={
            "serving_default": module.serve.get_concrete_function(),
            "greedy": module.greedy.get_concrete_function(),
            "attention": module.attention.get_concrete_function(),
        },
    )
    return root


@pytest.fixture
def data_dir(tmp_path):
    org = tmp_path / "data" / "org_data"
    org.mkdir(parents=True)
    for split, (docs, refs) in {
        "train": (DOCS[:2], REFS[:2]),
        "dev": (DOCS[2:], REFS[2:]),
        "test": (DOCS, REFS),
    }.items():
        (org / f"{split}.src.txt").write_text("\n".join(docs) + "\n")
        (org / f"{split}.tgt.txt").write_text("\n".join(refs) + "\n")
    return str(tmp_path / "data")


def test_decode_documents_each_signature(saved_model):
    beam = decode_documents(saved_model, DOCS, batch_size=2, progress=False)
    assert beam == [" ".join(d.split()[:3]) for d in DOCS]
    greedy = decode_documents(
        saved_model / "1", DOCS[:3], signature="greedy", progress=False
    )
    assert greedy == [" ".join(d.split()[:2]) for d in DOCS[:3]]
    readable = decode_documents(saved_model, DOCS[:2], output="headlines")
    assert readable == ["<police> arrest five", "<the> central bank"]
    with pytest.raises(UserError, match="no 'nope' signature"):
        decode_documents(saved_model, DOCS, signature="nope")


def test_resolve_version_dir_picks_newest_integer(tmp_path):
    for name in ("2", "10", "latest"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "saved_model.pb").write_bytes(b"")
    assert version_folders.resolve_version_dir(tmp_path) == str(tmp_path / "10")
    assert version_folders.resolve_version_dir(tmp_path / "2") == str(tmp_path / "2")
    with pytest.raises(UserError, match="not found"):
        version_folders.resolve_version_dir(tmp_path / "missing")
    (tmp_path / "empty" / "3").mkdir(parents=True)  # a version without a model
    with pytest.raises(UserError, match="No SavedModel"):
        version_folders.resolve_version_dir(tmp_path / "empty")


def test_evaluate_writes_metrics_and_heatmaps(saved_model, data_dir, tmp_path, capsys):
    record = ev.evaluate(
        saved_model,
        "test",
        source=DataSource(data_dir=data_dir, tfds_dir=tmp_path / "tfds"),
        n_heatmaps=2,
        n_bootstrap=100,
        progress=False,
    )
    version = saved_model / "1"
    with open(version / "metrics.json") as f:
        written = json.load(f)
    assert written == record
    assert written["num_examples"] == len(DOCS)
    assert written["split"] == "test"
    assert written["signatures"] == {
        "beam": "serving_default",
        "greedy": "greedy",
        "lead_8": None,
    }
    systems = written["systems"]
    assert set(systems) == {"beam", "greedy", "lead_8"}
    expected = metrics.rouge_with_intervals(
        [" ".join(d.split()[:3]) for d in DOCS], REFS, n_bootstrap=100
    )
    # TFDS yields its own (fixed) order, so the bootstrap resamples other
    # indices than in file order: the means agree, the intervals hold them.
    for metric, score in systems["beam"].items():
        assert score["f1"] == pytest.approx(expected[metric]["f1"], abs=1e-3)
        assert score["low"] <= score["f1"] <= score["high"]
    for scores in systems.values():
        assert set(scores) == set(metrics.ROUGE_TYPES)
        for value in scores.values():
            assert value["low"] <= value["f1"] <= value["high"]
    assert written["heatmaps"] == ["heatmaps/example_0.png", "heatmaps/example_1.png"]
    # Each heatmap is the fake's attention for one pair, drawn again here:
    # the pair in TFDS's order, so each candidate pair is drawn.
    shown = []
    for i in range(2):
        with open(version / "heatmaps" / f"example_{i}.png", "rb") as f:
            pixels = _pixels(f.read())
        shown += [
            doc
            for doc, ref in zip(DOCS, REFS, strict=True)
            if _same_image(
                pixels, _fake_heatmap(doc, f"example {i} | reference: {ref}")
            )
        ]
    assert len(shown) == 2 and shown[0] != shown[1], shown
    out = capsys.readouterr().out
    assert "lead_8" in out and "rougeLsum" in out and "[" in out

    # max_examples, a custom output path and no heatmaps.
    other = saved_model.parent / "other.json"
    small = ev.evaluate(
        saved_model / "1",
        "validation",
        source=DataSource(data_dir=data_dir, tfds_dir=tmp_path / "tfds"),
        max_examples=2,
        n_heatmaps=0,
        output=other,
        n_bootstrap=50,
        progress=False,
    )
    assert small["num_examples"] == 2 and small["heatmaps"] == []
    assert json.loads(other.read_text())["split"] == "validation"


def test_evaluate_rejects_bad_split(saved_model):
    with pytest.raises(UserError, match="Received: split='dev'"):
        ev.evaluate(saved_model, "dev")


def _cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-m", "models.evaluation", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def test_cli_errors_are_one_line(tmp_path):
    result = _cli("--model-dir", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: Model folder not found. Received: model_dir={tmp_path / 'missing'}"
    )
    assert "Traceback" not in result.stderr
    result = _cli("--model-dir", str(tmp_path), "--split", "bogus")
    assert result.returncode == 2
    assert "invalid choice: 'bogus'" in result.stderr
    assert "Traceback" not in result.stderr


def test_heatmaps_are_labelled_with_the_words_as_written(
    saved_model, data_dir, tmp_path, monkeypatch
):
    # The fake's `source_words` / `headline_words` are its tokens upper-cased.
    labels = []

    def plot(attention, source, headline, path, title=None):
        labels.append((list(source), list(headline)))
        return str(path)

    monkeypatch.setattr(heatmap, "plot_attention", plot)
    ev.evaluate(
        saved_model,
        "test",
        source=DataSource(data_dir=data_dir, tfds_dir=tmp_path / "tfds"),
        max_examples=1,
        n_heatmaps=1,
        n_bootstrap=10,
        output=tmp_path / "metrics.json",
        progress=False,
    )
    [(source, headline)] = labels
    assert " ".join(source) in [d.upper() for d in DOCS]
    assert headline == source[:3]
