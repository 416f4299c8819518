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

    import tensorflow as tf

    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    docs = [
        "Café ZÜRICH naïve 東京 🙂 Ωμέγα 2,500 São",
        "“Quoted” Straße — Kraków déjà Niño 3½ İzmir",
    ]
    out = model.signatures["serving_default"](documents=tf.constant(docs))
    readable = [h.decode("utf-8") for h in out["headlines"].numpy()]
    normalized = [h.decode("utf-8") for h in out["normalized_headlines"].numpy()]
    source_words = {w.strip("“”") for d in docs for w in d.split()}
    for headline, tokens in zip(readable, normalized, strict=True):
        assert headline, tokens
        for i, word in enumerate(headline.split()):
            # As the source writes it: `ZÜRICH`, not the model's `zürich`;
            # the first word takes a capital (`naïve` opens as `Naïve`).
            # Quotation marks alone are the source's too.
            word = word.strip("“”")
            if not word:
                continue
            spellings = {word, word[:1].lower() + word[1:]} if i == 0 else {word}
            assert spellings & source_words, (headline, tokens)
    assert any(set(h) - set("“”— ") and not h.isascii() for h in readable), readable
    assert (tmp_path / "export" / "1" / "metrics.json").exists()
