"""End to end: train.py on tiny made-up data, export, reload, decode, resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from e2e import ROOT, run, train_command, write_org_data
from rouge_score import rouge_scorer

pytestmark = pytest.mark.tf_only


@pytest.mark.slow  # end to end: trains
def test_export_layout_and_metrics(trained):
    tmp_path, result = trained
    # `--strategy mirrored --cpu-devices 2`: the replica count is only printed.
    assert re.search(r" on (\d+) replicas", result.stderr)[1] == "2"
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
    # The lead baseline's N is the training headlines' median length: 3.
    assert set(metrics["systems"]) >= {"beam", "greedy", "lead_3"}
    assert (metrics["split"], metrics["num_examples"]) == ("test", 8)
    # The lead baseline's ROUGE-1 on the 8 test pairs, scored here directly
    # (the headline is a document's first 3 words: full recall).
    data = tmp_path / "data" / "org_data"
    docs = data.joinpath("test.src.txt").read_text().splitlines()
    refs = data.joinpath("test.tgt.txt").read_text().splitlines()
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    lead = [
        scorer.score(r, " ".join(d.split()[:3]))["rouge1"]
        for d, r in zip(docs, refs, strict=True)
    ]
    assert all(s.recall == 1.0 for s in lead)
    lead_3 = metrics["systems"]["lead_3"]["rouge1"]
    # metrics.json keeps four decimals.
    assert lead_3["f1"] == pytest.approx(
        100 * np.mean([s.fmeasure for s in lead]), abs=1e-4
    )
    for system in metrics["systems"].values():
        assert (
            system["rouge1"]["low"]
            <= system["rouge1"]["f1"]
            <= system["rouge1"]["high"]
        )
    # The first 4 test examples' heatmaps (evaluate's default), as listed.
    listed = [f"heatmaps/example_{i}.png" for i in range(4)]
    assert metrics["heatmaps"] == listed
    on_disk = sorted(version.glob("heatmaps/*"))
    assert [p.relative_to(version).as_posix() for p in on_disk] == listed
    # Images (decoded here), one per example: four documents, four pictures.
    from matplotlib import image

    pictures = [image.imread(p, format="png") for p in on_disk]
    assert all(p.ndim == 3 and p.shape[0] > 100 and p.shape[1] > 100 for p in pictures)
    assert all(
        a.shape != b.shape or not np.array_equal(a, b)
        for i, a in enumerate(pictures)
        for b in pictures[i + 1 :]
    )
    # The printed table's ROUGE-1 row is metrics.json's, at two decimals.
    lines = result.stdout.splitlines()
    systems = next(line.split()[1:] for line in lines if line.startswith("metric "))
    assert set(systems) == set(metrics["systems"])
    printed = next(line for line in lines if line.startswith("rouge1 "))
    assert [float(v) for v in re.findall(r"\d+\.\d+", printed)] == pytest.approx(
        [metrics["systems"][s]["rouge1"][k] for s in systems for k in BOUNDS],
        abs=0.005,
    )
    assert json.loads((version / "config.json").read_text())["sampled_softmax"] == 16
    run_config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert run_config["normalization"] == "gigaword"


# A score and its 95% interval, as metrics.json and the printed table hold them.
BOUNDS = ("f1", "low", "high")


def printed_table(text, header):
    """The rows printed under the line `header`: `[(numbers, chosen)]`.

    A row is its numbers, and whether it is marked `<- chosen`; the table
    ends at the first line that is not all numbers.
    """
    lines = text.splitlines()
    rows = []
    for line in lines[lines.index(header) + 1 :]:
        cells = line.replace("<- chosen", "").split()
        if not cells or not all(re.fullmatch(r"-?\d+(\.\d+)?", c) for c in cells):
            break
        rows.append(([float(c) for c in cells], "<- chosen" in line))
    return rows


def assert_printed_grid(text, header, rows, keys, chosen):
    """The table printed under `header` lists `rows` (each row's `keys`,
    ROUGE-1 and mean length, at two decimals) and marks the `chosen` one."""
    printed = printed_table(text, header)
    assert [numbers for numbers, _ in printed] == [
        pytest.approx([r[k] for k in (*keys, "rouge1", "mean_length")], abs=0.005)
        for r in rows
    ]
    assert [marked for _, marked in printed] == [
        all(r[k] == chosen[k] for k in keys) for r in rows
    ]


@pytest.mark.slow  # end to end: trains
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
    # Then greedy search's end penalty, with the beam's chosen settings.
    greedy = tuning["greedy_grid"]
    assert [r["greedy_end_penalty"] for r in greedy] == [0.0, 2.0]
    best_greedy = max(greedy, key=lambda r: r["rouge1"])
    assert exported["greedy_end_penalty"] == best_greedy["greedy_end_penalty"]
    # The tables printed while tuning are the files' grids, the choice marked.
    keys = ("length_penalty", "no_repeat_ngram_size")
    header = "  ".join(keys) + "  ROUGE-1  mean length"
    assert_printed_grid(result.stderr, header, tuning["grid"], keys, exported)
    header = "greedy_end_penalty  ROUGE-1  mean length"
    keys = ("greedy_end_penalty",)
    assert_printed_grid(result.stderr, header, greedy, keys, exported)


def test_served_headlines_are_readable():
    """The readable headline writes the source's words as written.

    On the model set by hand (`scripted.ScriptedModel`), which writes the
    source's first words: the headlines are known before the search runs.
    """
    import scripted
    import tensorflow as tf

    from models.decoding.headline_module import HeadlineModule
    from models.text import RESERVED

    # Gigaword's form, as the trained run's: digits masked, lowercased.
    vocabulary = list(RESERVED) + ["said", "w#", "w##", "corp.", "'s", ",", "."]
    features = scripted.features(16, vocabulary, "gigaword")
    module = HeadlineModule(
        scripted.ScriptedModel(vocabulary), features, scripted.OPTIONS
    )
    docs = ["W12 W3 W25 W7 Corp. W30 W1 W8", "W5 W6 Corp. W17 W2 W9", "W40's W3, said"]
    # Cut at 5 tokens; the last ends before (its source does).
    normalized = ["w## w# w## w# corp.", "w# w# corp. w## w#", "w## 's w# , said"]
    readable = ["W12 W3 W25 W7 Corp.", "W5 W6 Corp. W17 W2", "W40's W3, said"]
    for search in (module.beam, module.greedy):
        out = search(tf.constant(docs))
        assert [h.decode() for h in out["normalized_headlines"].numpy()] == normalized
        assert [h.decode() for h in out["headlines"].numpy()] == readable


def test_odd_documents_get_the_headlines_worked_out_by_hand():
    """Empty, 100k-character, control-character and 5,000-word documents, on
    the model set by hand (`scripted.ScriptedModel`, which writes the
    source's first words): each one's headline is known, alone or batched."""
    import scripted
    import tensorflow as tf

    from models.decoding.headline_module import HeadlineModule

    module = HeadlineModule(
        scripted.ScriptedModel(), scripted.features(16), scripted.OPTIONS
    )
    expected = {
        # No word: the end token is banned first (min_length 1), so the
        # likeliest word past the source's end.
        "": ("filler", "Filler"),
        # Cut to its first 4,096 characters: `alpha` and an unknown word,
        # which the readable headline leaves out.
        "alpha " + "x" * 100000 + " bravo": ("alpha <unk>", "Alpha"),
        "alpha \u0000\u0007 bravo\r\n\tcharlie": (
            "alpha bravo charlie",
            "Alpha bravo charlie",
        ),
        # 5,000 words: the first 16 read, 5 written.
        "echo " * 5000: ("echo echo echo echo echo", "Echo echo echo echo echo"),
    }
    docs = list(expected)
    for search in (module.beam, module.greedy):
        batched = search(tf.constant(docs))
        for i, doc in enumerate(docs):
            alone = search(tf.constant([doc]))
            for out, j in ((batched, i), (alone, 0)):
                got = tuple(
                    out[key].numpy()[j].decode()
                    for key in ("normalized_headlines", "headlines")
                )
                assert got == expected[doc], (doc[:20], got)


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
alone = [model.signatures["serving_default"](documents=tf.constant([d]))
         for d in docs + ["w5 " * 16]]
loaded = [m for m in sys.modules if m.split(".")[0] in ("keras_attn", "models")]
print(json.dumps({
    "headlines": [h.decode("utf-8") for h in out["headlines"].numpy()],
    "alone": [a["headlines"].numpy()[0].decode("utf-8") for a in alone],
    "scores": out["scores"].numpy().tolist(),
    "attention_shape": att["attention"].shape.as_list(),
    "source_shape": att["source_tokens"].shape.as_list(),
    "greedy": len(greedy["headlines"].numpy()),
    "project_modules": loaded,
}))
"""


@pytest.mark.slow  # end to end: trains
def test_savedmodel_serves_raw_text_without_project_code(trained):
    tmp_path, _ = trained
    result = run(
        [sys.executable, "-c", SERVE_WITHOUT_PROJECT, str(tmp_path / "export" / "1")],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["project_modules"] == []
    # Each document's headline is the one it gets alone: the empty, the
    # 100k-character and the control-character ones included.
    assert out["headlines"] == out["alone"][:6]
    # 5,000 words are cut to the first max_source_length (16) of them.
    assert out["headlines"][5] == out["alone"][6]
    assert np.all(np.isfinite(out["scores"]))
    batch, steps, source = out["attention_shape"]
    assert batch == 3 and out["source_shape"][:2] == [3, source] and steps <= 5
    assert out["greedy"] == 2


def cli_signatures(text):
    """`{name: (inputs, outputs)}` of `saved_model_cli show --all`'s output."""
    signatures, current = {}, None
    for line in text.splitlines():
        if match := re.match(r"signature_def\['([^']+)'\]:", line):
            current = signatures[match[1]] = ([], [])
        elif match := re.match(r"\s+(inputs|outputs)\['([^']+)'\] tensor_info:", line):
            current[match[1] == "outputs"].append(match[2])
    return {name: (sorted(i), sorted(o)) for name, (i, o) in signatures.items()}


@pytest.mark.slow  # end to end: trains
def test_saved_model_cli_lists_signatures(trained):
    from tensorflow.core.protobuf import saved_model_pb2

    tmp_path, _ = trained
    version = tmp_path / "export" / "1"
    cli = Path(sys.executable).with_name("saved_model_cli")
    result = run([str(cli), "show", "--all", "--dir", str(version)])
    assert result.returncode == 0, result.stderr[-2000:]
    # What the CLI lists is what the SavedModel's graph file holds.
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((version / "saved_model.pb").read_bytes())
    (graph,) = proto.meta_graphs
    assert cli_signatures(result.stdout) == {
        name: (sorted(sig.inputs), sorted(sig.outputs))
        for name, sig in graph.signature_def.items()
    }
    signatures = cli_signatures(result.stdout)
    headlines = ["headlines", "normalized_headlines", "scores"]
    for name in ("serving_default", "greedy"):
        assert signatures[name] == (["documents"], headlines)
    assert set(headlines) < set(signatures["attention"][1])
    assert signatures["length_control"][0] == [
        "documents",
        "length_penalty",
        "max_length",
        "min_length",
    ]


ROUGE_LINE = re.compile(r"validation ROUGE-1/2/L on \d+ examples: ([\d.]+) /")
# The validation ROUGE-1 of each validation, set by hand (`SCRIPTED_ROUGE`):
# the best is the second (index 1) whichever validation the kill comes after.
ROUGE = [20.0, 35.0, 30.0, 25.0] + [10.0] * 46
# Both runs report `ROUGE` as their validation score, printed as
# `ValidationRouge` prints it: train.py's main with the callback's
# `on_epoch_end` replaced once TensorFlow is imported (by `train.py`'s order).
SCRIPTED_ROUGE = f"""
import sys
import time

import train

ROUGE = {ROUGE!r}


def on_epoch_end(self, epoch, logs=None):
    # A real validation's time: the kill, within 0.1 s of a backup, then
    # lands long before the next one.
    time.sleep(1.0)
    logs["val_rouge1"] = ROUGE[epoch]
    print(f"validation ROUGE-1/2/L on 1 examples: {{ROUGE[epoch]:.1f}} / 0.0 / 0.0")


real_import = train.import_tensorflow


def import_tensorflow(*args, **kwargs):
    out = real_import(*args, **kwargs)
    from models.training.callbacks import ValidationRouge

    ValidationRouge.on_epoch_end = on_epoch_end
    return out


train.import_tensorflow = import_tensorflow
sys.exit(train.main(sys.argv[1:]))
"""


def _backed_up_validations(metadata):
    try:
        return json.loads(metadata.read_text())["epoch"]
    except (FileNotFoundError, json.JSONDecodeError):  # not yet, or mid-write
        return -1


def _killed_run(tmp_path, args, validations_done):
    """Starts training, kills it with SIGKILL once `validations_done`
    validations are backed up; returns the backup's validations and each
    validation's ROUGE-1.

    The kill comes within 0.1 s of the validation's backup, long before the
    next one (an interval and its validation later, with `--checkpoint-every`
    above an interval's steps): it never tears a backup's files.
    """
    log = tmp_path / "killed.log"
    # Unbuffered, so that every line printed before the kill is in the log.
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        command = train_command(tmp_path, *args)
        process = subprocess.Popen(
            [command[0], "-c", SCRIPTED_ROUGE, *command[2:]],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        metadata = tmp_path / "run" / "backup" / "training_metadata.json"
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline
            and process.poll() is None
            and _backed_up_validations(metadata) < validations_done
        ):
            time.sleep(0.1)
        assert process.poll() is None, f"training exited early ({process.returncode})"
        process.send_signal(signal.SIGKILL)
        process.wait()
    saved = json.loads(metadata.read_text())["epoch"]
    # ValidationRouge prints before the backup is written: every backed-up
    # validation has its line, at one decimal.
    rouge = [float(v) for v in ROUGE_LINE.findall(log.read_text())]
    assert saved >= validations_done and len(rouge) >= saved, rouge
    return saved, rouge[:saved]


def _backed_up_state(run_dir):
    """The weights and optimizer step count the backup in `run_dir` holds,
    read into a fresh model."""
    from models.settings.fit import TrainOptions
    from models.training import fit as training

    config, _ = training.load_run(run_dir)
    backed_up = training.build_model(config, TrainOptions())
    # Unbuilt, the optimizer would skip its saved variables.
    backed_up.optimizer.build(backed_up.trainable_variables)
    backed_up.load_weights(str(run_dir / "backup" / "latest.weights.h5"))
    return [np.array(w) for w in backed_up.weights], int(backed_up.optimizer.iterations)


@pytest.mark.slow  # end to end: trains
def test_resume_after_kill(tmp_path, monkeypatch, capsys):
    """After kill -9, a resumed run starts from exactly the backed-up state:
    weights, optimizer (step counter included), best model, early stopping."""
    import keras

    from models.training import fit as training

    # 10 steps an interval (a pass) and a backup at each validation, none
    # within an interval: a tiny step takes milliseconds, so a backup every
    # few steps would be written again (and torn by the kill) right after
    # the one waited for. At most 8 validations.
    write_org_data(tmp_path / "data", sizes=(80, 8, 8))
    args = ["--checkpoint-every", "1000", "--skip-eval", "--patience", "40"]
    args += ["--validate-every", "80", "--train-examples", "640"]
    saved, rouge = _killed_run(tmp_path, args, validations_done=2)
    assert rouge == ROUGE[:saved]

    expected_weights, expected_iterations = _backed_up_state(tmp_path / "run")
    assert expected_iterations > 0
    best = 1

    seen = {}
    backups = []

    class RecordingBackup(training.Backup):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            backups.append(self)

    class Probe(keras.callbacks.Callback):
        # Every callback's on_train_begin (the restore) has run by now.
        def on_epoch_begin(self, epoch, logs=None):
            if seen:
                return
            checkpoint, stopping = backups[0].tracked
            seen.update(
                epoch=epoch,
                weights=[np.array(w) for w in self.model.weights],
                iterations=int(self.model.optimizer.iterations),
                checkpoint_best=checkpoint.best,
                stopping_best=stopping.best,
                best_epoch=stopping.best_epoch,
                wait=stopping.wait,
            )

    real_fit = training.fit

    def fit_with_probe(
        model, train, validation, run_dir, options, callbacks=(), **kwargs
    ):
        return real_fit(
            model, train, validation, run_dir, options, [*callbacks, Probe()], **kwargs
        )

    def scripted_rouge(self, epoch, logs=None):
        logs["val_rouge1"] = ROUGE[epoch]

    monkeypatch.setattr(training.ValidationRouge, "on_epoch_end", scripted_rouge)
    monkeypatch.setattr(training, "Backup", RecordingBackup)
    monkeypatch.setattr(training, "fit", fit_with_probe)
    argv = train_command(tmp_path, *args)[2:]
    code, err = train_main(capsys, argv)
    assert code == 0, err[-3000:]
    assert f"training (seed 0, from validation {saved + 1})" in err

    assert seen["epoch"] == saved
    assert seen["iterations"] == expected_iterations
    assert len(seen["weights"]) == len(expected_weights)
    for got, want in zip(seen["weights"], expected_weights, strict=True):
        np.testing.assert_array_equal(got, want)
    assert seen["checkpoint_best"] == seen["stopping_best"] == ROUGE[best]
    assert seen["best_epoch"] == best
    assert seen["wait"] == saved - 1 - best
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()


def train_main(capsys, argv):
    """train.py's main in this process: error paths fail before training."""
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
    argv = train_command(tmp_path, "--train-examples", "8")[2:]
    code, err = train_main(capsys, argv)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("train.py: error")]
    assert len(errors) == 1 and message in errors[0], err[-2000:]
    assert "Traceback" not in err


def test_unknown_dataset_and_missing_dir(tmp_path, capsys):
    # The data dir is never written.
    code, err = train_main(capsys, train_command(tmp_path)[2:])
    assert code == 2 and "train.py: error" in err
    argv = ["--dataset", "no_such_dataset_xyz", "--tfds-dir", str(tmp_path / "tfds")]
    code, err = train_main(capsys, argv)
    assert code == 2 and "no_such_dataset_xyz" in err


HELP_WITHOUT_FRAMEWORKS = r"""
import json, runpy, sys
sys.argv = ["train.py", "--help"]
try:
    runpy.run_path("train.py", run_name="__main__")
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "jax"})
print(json.dumps(heavy), file=sys.stderr)
"""


def test_help_documents_every_flag():
    result = run([sys.executable, "-c", HELP_WITHOUT_FRAMEWORKS])
    assert result.returncode == 0, result.stderr[-2000:]
    # --help answers at once: no framework is imported to print it.
    assert json.loads(result.stderr.splitlines()[-1]) == []
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
