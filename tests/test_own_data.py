"""Training on one's own data: any Unicode, in the org_data layout."""

import json

import numpy as np
import pytest
from e2e import run, train_command

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

# Accents, capitals, CJK, emoji, Greek, typographic quotes and dashes.
WORDS = ["Café", "ZÜRICH", "naïve", "São", "Straße", "東京", "🙂", "Ωμέγα", "déjà"]
WORDS += ["Niño", "Kraków", "İzmir", "Ærø", "“Quoted”", "—", "3½", "2,500"]


def write_unicode_org_data(root, sizes=(64, 8, 8), seed=0):
    """Documents of the words above; the headline is their first three."""
    rng = np.random.default_rng(seed)
    folder = root / "org_data"
    folder.mkdir(parents=True)
    for split, n in zip(("train", "dev", "test"), sizes, strict=True):
        docs = [list(rng.choice(WORDS, size=rng.integers(5, 10))) for _ in range(n)]
        text = {
            "src": "".join(" ".join(d) + "\n" for d in docs),
            "tgt": "".join(" ".join(d[:3]) + "\n" for d in docs),
        }
        for kind, content in text.items():
            (folder / f"{split}.{kind}.txt").write_text(content, encoding="utf-8")


def test_train_export_decode_on_unicode_data(tmp_path):
    write_unicode_org_data(tmp_path / "data")
    command = train_command(
        tmp_path, "--epochs", "2", "--steps-per-epoch", "20", "--max-eval-examples", "8"
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").split()
    assert {"café", "zürich", "東京", "🙂", "ωμέγα", "2,500"} <= set(vocabulary)
    # Capitals and digits in the data: the general form, digits kept.
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["normalization"] == "general"

    import scripted
    import tensorflow as tf

    from models.inference import HeadlineModule
    from models.run_folder import load_run, load_vocabulary

    docs = [
        "Café ZÜRICH naïve 東京 🙂 Ωμέγα 2,500 São",
        "“Quoted” Straße — Kraków déjà Niño 3½ İzmir",
        "İzmir Ærø 3½",
    ]
    # The export decodes the documents into the run's words (or copies).
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    out = model.signatures["serving_default"](documents=tf.constant(docs))
    for tokens in out["normalized_headlines"].numpy():
        assert set(tokens.decode("utf-8").split()) <= set(vocabulary), tokens
    assert (tmp_path / "export" / "1" / "metrics.json").exists()

    # Readable headlines, on the run's own text features and vocabulary and
    # a model set by hand, which writes each source's first five words
    # (`scripted.ScriptedModel`): as the source writes them (`ZÜRICH`, not
    # the model's `zürich`; `“Quoted”`, not its ``` `` quoted '' ```).
    _, features = load_run(tmp_path / "run")
    words = load_vocabulary(tmp_path / "run" / "vocab.txt")
    module = HeadlineModule(scripted.ScriptedModel(words), features, scripted.OPTIONS)
    out = module.beam(tf.constant(docs))
    assert [h.decode("utf-8") for h in out["normalized_headlines"].numpy()] == [
        "café zürich naïve 東京 🙂",
        "`` quoted '' straße --",
        "i̇zmir ærø 3½",
    ]
    assert [h.decode("utf-8") for h in out["headlines"].numpy()] == [
        "Café ZÜRICH naïve 東京 🙂",
        "“Quoted” Straße —",
        "İzmir Ærø 3½",
    ]
