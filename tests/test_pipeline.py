"""End to end: train.py on tiny made-up data, export, reload, decode, resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.tf_only

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"w{i}" for i in range(40)] + ["corp.", "'s", ",", "."]
TINY_MODEL = [
    "--vocab-size",
    "60",
    "--embedding-dim",
    "16",
    "--hidden-size",
    "16",
    "--attention-units",
    "8",
    "--batch-size",
    "8",
    "--max-source-length",
    "16",
    "--max-target-length",
    "6",
    "--validation-rouge-examples",
    "4",
    "--beam-size",
    "2",
    "--max-length",
    "5",
    "--min-length",
    "1",
    # Decoding tuning traces a search per n-gram size: only where tested.
    "--no-tune-decoding",
]


def write_org_data(root, sizes=(48, 8, 8), seed=0):
    """Random documents; the headline is three of their words."""
    rng = np.random.default_rng(seed)
    folder = root / "org_data"
    folder.mkdir(parents=True)
    for split, n in zip(("train", "dev", "test"), sizes, strict=True):
        docs, heads = [], []
        for _ in range(n):
            doc = list(rng.choice(WORDS, size=rng.integers(6, 14)))
            docs.append(" ".join(doc))
            heads.append(" ".join(doc[:3]))
        (folder / f"{split}.src.txt").write_text("\n".join(docs) + "\n")
        (folder / f"{split}.tgt.txt").write_text("\n".join(heads) + "\n")
    return root


def train_command(tmp_path, *extra):
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "--data-dir",
        str(tmp_path / "data"),
        "--tfds-dir",
        str(tmp_path / "tfds"),
        "--run-dir",
        str(tmp_path / "run"),
        "--export-dir",
        str(tmp_path / "export"),
        *TINY_MODEL,
        *extra,
    ]


def run(command, cwd=ROOT):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny training run on two replicas, exported and evaluated."""
    tmp_path = tmp_path_factory.mktemp("e2e")
    write_org_data(tmp_path / "data")
    result = run(
        train_command(
            tmp_path,
            "--strategy",
            "mirrored",
            "--cpu-devices",
            "2",
            "--epochs",
            "2",
            "--steps-per-epoch",
            "3",
            "--max-eval-examples",
            "8",
            "--sampled-softmax",
            "16",
            "--tune-decoding",
            "--tune-examples",
            "8",
            "--tune-length-penalties",
            "0.5",
            "3.0",
            "--tune-ngram-sizes",
            "0",
            "2",
            # The data has digits (`w12`), which would choose `general`.
            "--normalization",
            "gigaword",
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp_path, result


def test_export_layout_and_metrics(trained):
    tmp_path, result = trained
    assert "2 replicas" in result.stderr
    version = tmp_path / "export" / "1"
    for name in (
        "saved_model.pb",
        "config.json",
        "model.keras",
        "metrics.json",
        "search_options.json",
    ):
        assert (version / name).exists(), name
    assert not [p for p in (tmp_path / "export").iterdir() if p.name.startswith(".tmp")]
    metrics = json.loads((version / "metrics.json").read_text())
    assert set(metrics["systems"]) >= {"beam", "greedy", "lead_8"}
    assert 0 <= metrics["systems"]["beam"]["rouge1"]["f1"] <= 100
    assert list((version / "heatmaps").glob("*.png"))
    assert "rouge1" in result.stdout
    assert json.loads((version / "config.json").read_text())["sampled_softmax"] == 16


def test_decoding_settings_are_tuned_on_validation(trained):
    tmp_path, result = trained
    tuning = json.loads((tmp_path / "run" / "search_tuning.json").read_text())
    grid = {(r["length_penalty"], r["no_repeat_ngram_size"]) for r in tuning["grid"]}
    assert grid == {(0.5, 0), (3.0, 0), (0.5, 2), (3.0, 2)}
    best = max(tuning["grid"], key=lambda r: r["rouge1"])
    exported = json.loads(
        (tmp_path / "export" / "1" / "search_options.json").read_text()
    )
    assert exported == tuning["chosen"]
    assert (exported["length_penalty"], exported["no_repeat_ngram_size"]) == (
        best["length_penalty"],
        best["no_repeat_ngram_size"],
    )
    assert "<- chosen" in result.stderr


def test_a_finished_run_exports_again_as_the_next_version(trained):
    tmp_path, _ = trained
    sys.path.insert(0, str(ROOT))
    import tensorflow as tf

    from models.export import export_run

    first = tmp_path / "export" / "1"
    again = export_run(tmp_path / "run", tmp_path / "export")
    assert again == tmp_path / "export" / "2"
    # The run's tuned decoding settings, as in the first export.
    assert json.loads((again / "search_options.json").read_text()) == json.loads(
        (first / "search_options.json").read_text()
    )
    docs = tf.constant(["w1 w2 w3 w4 corp. said", "w5 w6 w7 w8 w9"])
    models = [tf.saved_model.load(str(v)) for v in (first, again)]
    for signature in ("greedy", "serving_default"):
        first_out, again_out = (m.signatures[signature](documents=docs) for m in models)
        assert first_out["headlines"].numpy().tolist() == (
            again_out["headlines"].numpy().tolist()
        )


def test_served_headlines_are_readable(trained):
    tmp_path, _ = trained
    import tensorflow as tf

    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert json.loads((tmp_path / "run" / "config.json").read_text())[
        "normalization"
    ] == ("gigaword")
    # Every word has a digit and a capital letter, masked and lowercased in
    # the model's tokens (`w##`, `corp.`).
    docs = ["W12 W3 W25 W7 Corp. W30 W1 W8", "W5 W6 Corp. W17 W2 W9"]
    words = {w.strip(".") for d in docs for w in d.split()}
    for signature in ("greedy", "serving_default"):
        out = model.signatures[signature](documents=tf.constant(docs))
        readable = [h.decode() for h in out["headlines"].numpy()]
        normalized = [h.decode() for h in out["normalized_headlines"].numpy()]
        assert any("#" in h for h in normalized), normalized
        for headline, tokens in zip(readable, normalized, strict=True):
            assert "#" not in headline
            # The source's own words, or punctuation the vocabulary has.
            for word in headline.split():
                word = word.removesuffix("'s").strip(",.'")
                assert not word or word in words, (headline, tokens)
            assert len(headline.split()) <= len(tokens.split())


SERVE_WITHOUT_PROJECT = r"""
import sys, json
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
docs = ["", "w1 w2 w3 w4 corp. said",
        "Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.",
        "x" * 100000, "ünïcødé 日本語 \u0000\u0007 text\r\n\t", "w5 " * 5000]
out = model.signatures["serving_default"](documents=tf.constant(docs))
att = model.signatures["attention"](documents=tf.constant(docs[:3]))
greedy = model.signatures["greedy"](documents=tf.constant(docs[:2]))
loaded = [m for m in sys.modules if m.split(".")[0] in ("keras_attn", "models")]
print(json.dumps({
    "headlines": [h.decode("utf-8") for h in out["headlines"].numpy()],
    "scores": out["scores"].numpy().tolist(),
    "attention_shape": att["attention"].shape.as_list(),
    "source_shape": att["source_tokens"].shape.as_list(),
    "greedy": len(greedy["headlines"].numpy()),
    "project_modules": loaded,
}))
"""


def test_savedmodel_serves_raw_text_without_project_code(trained):
    tmp_path, _ = trained
    result = run(
        [sys.executable, "-c", SERVE_WITHOUT_PROJECT, str(tmp_path / "export" / "1")],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["project_modules"] == []
    assert len(out["headlines"]) == 6 and all(
        isinstance(h, str) for h in out["headlines"]
    )
    assert np.all(np.isfinite(out["scores"]))
    batch, steps, source = out["attention_shape"]
    assert batch == 3 and out["source_shape"][:2] == [3, source] and steps <= 5
    assert out["greedy"] == 2


def test_saved_model_cli_lists_signatures(trained):
    tmp_path, _ = trained
    cli = Path(sys.executable).with_name("saved_model_cli")
    result = run([str(cli), "show", "--all", "--dir", str(tmp_path / "export" / "1")])
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ("serving_default", "attention", "greedy", "headlines", "documents"):
        assert name in result.stdout


def test_resume_after_kill(tmp_path):
    write_org_data(tmp_path / "data", sizes=(200, 8, 8))
    command = train_command(
        tmp_path, "--epochs", "50", "--checkpoint-every", "5", "--skip-eval"
    )
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    metadata = tmp_path / "run" / "backup" / "training_metadata.json"
    deadline = time.monotonic() + 300
    while (
        time.monotonic() < deadline
        and process.poll() is None
        and not (metadata.exists() and json.loads(metadata.read_text())["epoch"] >= 1)
    ):
        time.sleep(0.5)
    assert process.poll() is None, f"training exited early ({process.returncode})"
    process.send_signal(signal.SIGKILL)
    process.wait()
    saved_epoch = json.loads(metadata.read_text())["epoch"]
    assert saved_epoch >= 1

    result = run(
        train_command(
            tmp_path,
            "--epochs",
            str(saved_epoch + 1),
            "--checkpoint-every",
            "5",
            "--skip-eval",
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming run" in result.stderr
    # Keras counts epochs from the restored one: only the last epoch ran.
    assert f"Epoch {saved_epoch + 1}/{saved_epoch + 1}" in result.stdout
    assert f"Epoch 1/{saved_epoch + 1}" not in result.stdout
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()


def train_main(capsys, argv):
    """train.py's main in this process: error paths fail before training."""
    sys.path.insert(0, str(ROOT))
    import train

    code = train.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: (d / "org_data" / "train.src.txt").unlink(), "train.src.txt"),
        (lambda d: (d / "org_data" / "dev.tgt.txt").write_text("a\nb\n"), "dev"),
        (
            lambda d: (d / "org_data" / "test.src.txt").write_text(
                "a\n\nb\n" + "c\n" * 5
            ),
            "empty",
        ),
        (
            lambda d: (d / "org_data" / "train.tgt.txt").write_bytes(
                (d / "org_data" / "train.tgt.txt")
                .read_bytes()
                .replace(b"w1", b"\xff\xfe", 1)
            ),
            "UTF-8",
        ),
    ],
    ids=["missing-file", "count-mismatch", "empty-line", "not-utf8"],
)
def test_bad_data_one_line_error(tmp_path, capsys, mutate, message):
    write_org_data(tmp_path / "data")
    mutate(tmp_path / "data")
    argv = train_command(tmp_path, "--epochs", "1", "--steps-per-epoch", "1")[2:]
    code, err = train_main(capsys, argv)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("train.py: error")]
    assert len(errors) == 1 and message in errors[0], err[-2000:]
    assert "Traceback" not in err


def test_unknown_dataset_and_missing_dir(tmp_path, capsys):
    # The data dir is never written.
    code, err = train_main(capsys, train_command(tmp_path, "--epochs", "1")[2:])
    assert code == 2 and "train.py: error" in err
    argv = ["--dataset", "no_such_dataset_xyz", "--tfds-dir", str(tmp_path / "tfds")]
    code, err = train_main(capsys, argv)
    assert code == 2 and "no_such_dataset_xyz" in err


HELP_WITHOUT_FRAMEWORKS = r"""
import runpy, sys
sys.argv = ["train.py", "--help"]
try:
    runpy.run_path("train.py", run_name="__main__")
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "jax"})
print("imported:", heavy, file=sys.stderr)
"""


def test_help_documents_every_flag():
    result = run([sys.executable, "-c", HELP_WITHOUT_FRAMEWORKS])
    assert result.returncode == 0, result.stderr[-2000:]
    # --help answers at once: no framework is imported to print it.
    assert "imported: []" in result.stderr
    for flag in (
        "--data-dir",
        "--attention",
        "--copy",
        "--coverage",
        "--beam-size",
        "--max-train-minutes",
        "--strategy",
        "--checkpoint-every",
    ):
        assert flag in result.stdout
