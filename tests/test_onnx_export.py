"""`python -m models.export --format onnx` on the `trained` fixture's run: the
ids-level search in ONNX Runtime gives the SavedModel's search's ids, and the
client (`serving.onnx_client`), without TensorFlow, the SavedModel's
headlines."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
from e2e import ROOT, run  # noqa: E402

# Accents, Chinese and Japanese, emoji, typographic quotes and dashes,
# Gigaword's unknown markers, a masked ordinal, casing the vocabulary folds.
DOCUMENTS = [
    "w1 w2 w3 w4 corp. said",
    "Café naïve résumé w1 w2 «quoted» w3",
    "東京で2024年 w4 w5 NEC",
    "w1 😀 w2 🚀🚀 w3",
    "“Typographic” quotes ‘here’ w5 — dash w6",
    "UNK w1 unk w2 <unk>",
    "second-quarter w12 #st-qtr w1",
    "İstanbul ΟΔΟΣ w7 w8 12,500 3:30 U.S. co.",
    "w1 (w2) [w3] w4 & w5 / w6 $4.3 can't",
    "",
]


@pytest.fixture(scope="module")
def exports(trained, tmp_path_factory):
    """`(saved_model, onnx)`: the fixture's SavedModel version folder and
    its ONNX export's, written by the command line."""
    folder, _ = trained
    saved_model = folder / "export" / "1"
    onnx_dir = tmp_path_factory.mktemp("onnx")
    command = [
        *(sys.executable, "-m", "models.export"),
        *("--run-dir", str(saved_model), "--export-dir", str(onnx_dir)),
        *("--search-options", str(saved_model / "search_options.json")),
        *("--format", "onnx"),
    ]
    done = run(command)
    assert done.returncode == 0, done.stderr[-3000:]
    return saved_model, onnx_dir / "1"


@pytest.mark.slow
def test_the_folder_holds_the_model_its_vocabulary_and_contract(exports):
    saved_model, onnx = exports
    assert sorted(p.name for p in onnx.iterdir()) == [
        "config.json",
        "headlines.onnx",
        "onnx_model.json",
        "vocab.txt",
    ]
    contract = json.loads((onnx / "onnx_model.json").read_text())
    assert contract["ids"] == {"pad": 0, "unk": 1, "start": 2, "end": 3}
    words = (onnx / "vocab.txt").read_text().rstrip("\n").split("\n")
    assert words[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert contract["vocab_size"] == len(words)
    options = json.loads((saved_model / "search_options.json").read_text())
    for name in ("beam_size", "length_penalty", "min_length", "max_length"):
        assert contract["search"][name] == options[name]
    assert list(contract["inputs"]) == ["source_ids", "source_lengths"]
    assert contract["max_source_length"] == 16  # e2e.TINY_MODEL's


def _search_ids(model, features, options, onnx):
    """`(expected, got)`: `model`'s search in a `tf.function`, as the
    SavedModel runs it, and ONNX Runtime's of the `onnx` folder, on
    `DOCUMENTS`' source ids."""
    import tensorflow as tf

    from models.decoding.headline_module import HeadlineModule
    from models.export.onnx_model import ids_search_function
    from serving.onnx_client import OnnxSummarizer

    module = HeadlineModule(model, features, options)
    source = features.encode_source(tf.constant(DOCUMENTS))
    lengths = tf.reduce_sum(tf.cast(source["ids"] > 0, tf.int32), axis=1)
    # (Eagerly, an empty document's first step is no distribution, which
    # the search refuses.)
    expected = ids_search_function(module)[0](source["ext_ids"], lengths)
    # Padding past a row's length is read as padding, whatever it holds.
    source_ids = np.where(source["ids"].numpy() > 0, source["ext_ids"].numpy(), 7)
    got = OnnxSummarizer(onnx).search_ids(source_ids, lengths.numpy())
    # Some source words are copies (extended ids).
    assert (source["ext_ids"].numpy() >= features.vocab_size).any()
    return {k: v.numpy() for k, v in expected.items()}, got


def _run_of(saved_model):
    """The export's features, search options and trained model."""
    from models.model.run_folder import load_run, load_trained_model
    from models.settings.search import SearchOptions

    _, features = load_run(saved_model)
    options = json.loads((saved_model / "search_options.json").read_text())
    return features, SearchOptions(**options), load_trained_model(saved_model)


@pytest.mark.slow
def test_onnx_runtime_gives_the_saved_model_search_ids(exports):
    saved_model, onnx = exports
    features, options, model = _run_of(saved_model)
    expected, got = _search_ids(model, features, options, onnx)
    np.testing.assert_array_equal(got["ids"], expected["ids"])
    np.testing.assert_array_equal(got["lengths"], expected["lengths"])
    np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-5)
    np.testing.assert_allclose(got["attention"], expected["attention"], atol=1e-5)
    assert len({tuple(r) for r in got["ids"].tolist()}) > 1


@pytest.mark.slow
def test_an_ensemble_goes_to_onnx_with_every_member(exports, tmp_path):
    from models.export.onnx_model import export_onnx
    from models.model.ensemble import SummarizerEnsemble
    from models.model.run_folder import load_trained_model

    saved_model, onnx = exports
    features, options, first = _run_of(saved_model)
    second = load_trained_model(saved_model)
    second.set_weights([0.5 * w for w in second.get_weights()])
    ensemble = SummarizerEnsemble([first, second])
    folder = export_onnx(ensemble, features, tmp_path, options=options)
    expected, got = _search_ids(ensemble, features, options, folder)
    np.testing.assert_array_equal(got["ids"], expected["ids"])
    np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-5)
    # The second member counts: the scores are not the first member's.
    alone, _ = _search_ids(first, features, options, onnx)
    assert np.abs(alone["scores"] - got["scores"]).max() > 1e-3


_CLIENT = """
import json, sys
from serving.onnx_client import OnnxSummarizer
out = OnnxSummarizer(sys.argv[1])(json.loads(sys.stdin.read()))
print(json.dumps({
    "headlines": out["headlines"],
    "normalized_headlines": out["normalized_headlines"],
    "scores": out["scores"].tolist(),
    "tensorflow_imported": "tensorflow" in sys.modules or "keras" in sys.modules,
}))
"""


@pytest.mark.slow
def test_the_client_gives_the_saved_model_headlines_without_tensorflow(exports):
    import tensorflow as tf

    saved_model, onnx = exports
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(onnx)],
        input=json.dumps(DOCUMENTS),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["tensorflow_imported"] is False
    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    expected = serve(documents=tf.constant(DOCUMENTS))
    for name in ("headlines", "normalized_headlines"):
        assert got[name] == [h.decode() for h in expected[name].numpy().tolist()]
    np.testing.assert_allclose(got["scores"], expected["scores"].numpy(), atol=1e-5)
    assert len(set(got["headlines"])) > 3


def test_the_client_names_the_extra_when_onnxruntime_is_missing(monkeypatch):
    from serving.onnx_client import OnnxSummarizer

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"keras-attn\[deploy\]") as error:
        OnnxSummarizer("anywhere")
    assert "\n" not in str(error.value)
