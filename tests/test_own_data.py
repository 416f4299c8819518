"""Training on one's own data: any Unicode, in the org_data layout."""

import json
import re

import numpy as np
import pytest
from e2e import run, train_command

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

# Accents, capitals, CJK, emoji, Greek, typographic quotes and dashes.
WORDS = ["Café", "ZÜRICH", "naïve", "São", "Straße", "東京", "🙂", "Ωμέγα", "déjà"]
WORDS += ["Niño", "Kraków", "İzmir", "Ærø", "“Quoted”", "—", "3½", "2,500"]


# Japanese, written without spaces, and Russian.
JAPANESE = ["東京", "株式", "市場", "上昇", "政府", "発表", "経済", "データ", "大阪"]
JAPANESE += ["銀行", "金利", "ゲーム"]
RUSSIAN = ["Москва", "выборы", "президент", "рынок", "нефть", "цены", "банк"]
RUSSIAN += ["рост", "правительство", "закон", "налоги", "Россия"]
# A Chinese or Japanese character (`models.text.cjk.CJK_LETTERS`, in brief).
KANJI_KANA = "[\u3040-\u30ff\u4e00-\u9fff]"


def write_unicode_org_data(
    root, words=WORDS, sizes=(64, 8, 8), seed=0, separator=" ", end=""
):
    """Documents of `words`; the headline is their first three.

    The words of a text are joined by `separator`, and `end` closes each
    document.
    """
    rng = np.random.default_rng(seed)
    folder = root / "org_data"
    folder.mkdir(parents=True)
    for split, n in zip(("train", "dev", "test"), sizes, strict=True):
        docs = [list(rng.choice(words, size=rng.integers(5, 10))) for _ in range(n)]
        text = {
            "src": "".join(separator.join(d) + end + "\n" for d in docs),
            "tgt": "".join(separator.join(d[:3]) + "\n" for d in docs),
        }
        for kind, content in text.items():
            (folder / f"{split}.{kind}.txt").write_text(content, encoding="utf-8")


def test_train_export_decode_on_unicode_data(tmp_path):
    write_unicode_org_data(tmp_path / "data")
    command = train_command(
        tmp_path,
        *("--validate-every", "160", "--train-examples", "320"),
        *("--max-eval-examples", "8"),
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").split()
    # Chinese and Japanese a character a token (`東`, `京`).
    assert {"café", "zürich", "東", "京", "🙂", "ωμέγα", "2,500"} <= set(vocabulary)
    # Capitals and digits in the data: the general form, digits kept.
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["normalization"] == "general"

    import scripted
    import tensorflow as tf

    from models.decoding.headline_module import HeadlineModule
    from models.model.run_folder import load_run, load_vocabulary

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
        "café zürich naïve 東 京",
        "`` quoted '' straße --",
        "i̇zmir ærø 3½",
    ]
    assert [h.decode("utf-8") for h in out["headlines"].numpy()] == [
        "Café ZÜRICH naïve 東京",
        "“Quoted” Straße —",
        "İzmir Ærø 3½",
    ]


def test_japanese_without_spaces_trains_and_serves_japanese(tmp_path):
    write_unicode_org_data(tmp_path / "data", JAPANESE, separator="", end="。")
    command = train_command(
        tmp_path,
        *("--validate-every", "160", "--train-examples", "320"),
        *("--max-eval-examples", "8"),
        # At least three tokens: three characters of the headline.
        *("--min-length", "3"),
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").split()
    # A character a token, the sentence's period too: no word of two.
    assert {"東", "京", "デ", "ー", "タ", "。"} <= set(vocabulary)
    assert "東京" not in vocabulary

    import tensorflow as tf

    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    docs = ["東京株式市場で金利が上昇した。", "政府が経済データを発表。"]
    out = model.signatures["serving_default"](documents=tf.constant(docs))
    for normalized, headline in zip(
        out["normalized_headlines"].numpy(), out["headlines"].numpy(), strict=True
    ):
        normalized, headline = normalized.decode(), headline.decode()
        # The model's tokens, a character each, written back without the
        # spaces between them.
        assert len(normalized.split()) >= 3, normalized
        assert headline == normalized.replace(" ", ""), (normalized, headline)
        assert re.search(f"{KANJI_KANA}{{2,}}", headline), headline


def test_russian_validation_rouge_is_a_curve(tmp_path):
    write_unicode_org_data(tmp_path / "data", RUSSIAN, sizes=(64, 16, 8))
    command = train_command(
        tmp_path,
        # Validations of about 15 batches, three or more.
        *("--validate-every", "120", "--train-examples", "360"),
        *("--max-eval-examples", "8"),
        *("--validation-rouge-examples", "16"),
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    schedule = json.loads((tmp_path / "run" / "schedule.json").read_text())
    assert schedule["max_validations"] >= 3
    # ValidationRouge's line at each validation: ROUGE-1 / 2 / L.
    rouge1 = [
        float(value)
        for value in re.findall(
            r"validation ROUGE-1/2/L on 16 examples: ([\d.]+) /", result.stdout
        )
    ]
    assert len(rouge1) == schedule["max_validations"], result.stdout[-3000:]
    # Scored on the Cyrillic words (rouge-score's own tokens would read none
    # of them: 0 at every validation), and rising as the model learns to stop after
    # the headline's three words.
    assert min(rouge1) > 0 and rouge1[-1] > rouge1[0], rouge1
