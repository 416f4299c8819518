"""Sequence-level distillation: the teacher's cached headlines, the student's run."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from e2e import ROOT, run, train_command, write_org_data

from models.settings.errors import UserError
from models.training import distill

pytestmark = pytest.mark.tf_only

DOCS = [f"doc {i} words here" for i in range(10)]


def _decoder(calls):
    """A teacher that writes `T<i>` for `doc <i> ...` and counts documents."""

    def decode(batch):
        calls.append(len(batch))
        return [f"T{d.split()[1]}" for d in batch]

    return decode


def test_cached_headlines_decode_once_in_chunks(tmp_path):
    calls = []
    manifest = {"teacher": "a", "documents": distill.documents_digest(DOCS)}
    out = distill.cached_headlines(
        DOCS, _decoder(calls), tmp_path, manifest, chunk_size=4, batch_size=3
    )
    assert out == [f"T{i}" for i in range(10)]
    # Chunks of 4, 4 and 2 documents, each decoded in batches of at most 3.
    assert calls == [3, 1, 3, 1, 2]
    chunks = sorted(p.name for p in tmp_path.glob("chunk-*.txt"))
    assert chunks == ["chunk-00000.txt", "chunk-00001.txt", "chunk-00002.txt"]
    assert (tmp_path / "chunk-00002.txt").read_text() == "T8\nT9\n"

    def no_decoding(batch):
        raise AssertionError(f"decoded again: {batch}")

    again = distill.cached_headlines(DOCS, no_decoding, tmp_path, manifest, 4, 3)
    assert again == out


def test_interrupted_decoding_keeps_whole_chunks_and_resumes(tmp_path):
    manifest = {"teacher": "a", "documents": distill.documents_digest(DOCS)}
    calls = []

    def dies_in_third_chunk(batch):
        if len(calls) == 2:
            raise KeyboardInterrupt
        return _decoder(calls)(batch)

    with pytest.raises(KeyboardInterrupt):
        distill.cached_headlines(DOCS, dies_in_third_chunk, tmp_path, manifest, 4, 4)
    assert sorted(p.name for p in tmp_path.glob("chunk-*")) == [
        "chunk-00000.txt",
        "chunk-00001.txt",
    ]
    calls.clear()
    out = distill.cached_headlines(DOCS, _decoder(calls), tmp_path, manifest, 4, 4)
    assert calls == [2]  # only the missing chunk's two documents
    assert out == [f"T{i}" for i in range(10)]


def test_kill_9_loses_at_most_the_chunk_being_decoded(tmp_path):
    """A real SIGKILL while chunks are written: every chunk file is whole."""
    script = textwrap.dedent(
        f"""
        import time
        from models.training import distill
        docs = [f"doc {{i}} words" for i in range(400)]
        def decode(batch):
            time.sleep(0.01)
            return [("long headline " * 50).strip() for _ in batch]
        distill.cached_headlines(docs, decode, {str(tmp_path)!r},
                                 {{"teacher": "t"}}, chunk_size=7, batch_size=7)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stderr=subprocess.DEVNULL, cwd=ROOT
    )
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("chunk-*.txt"))) < 5:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    chunks = sorted(tmp_path.glob("chunk-*.txt"))
    assert 5 <= len(chunks) < 58
    for chunk in chunks:
        lines = chunk.read_text().split("\n")
        assert lines[-1] == "" and len(lines) == 8, chunk.name
        assert set(lines[:-1]) == {("long headline " * 50).strip()}
    docs = [f"doc {i} words" for i in range(400)]
    calls = []
    out = distill.cached_headlines(
        docs, lambda b: calls.append(len(b)) or ["x"] * len(b), tmp_path,
        {"teacher": "t"}, chunk_size=7, batch_size=7,
    )  # fmt: skip
    assert len(out) == 400 and sum(calls) == 400 - 7 * len(chunks)


def test_a_cache_of_another_teacher_is_an_error(tmp_path):
    manifest = {"teacher": "a", "documents": distill.documents_digest(DOCS)}
    distill.cached_headlines(DOCS, _decoder([]), tmp_path, manifest, 4)
    other = dict(manifest, teacher="b")
    with pytest.raises(UserError, match=r"another teacher.*Received: teacher='b'"):
        distill.cached_headlines(DOCS, _decoder([]), tmp_path, other, 4)
    fewer = {"teacher": "a", "documents": distill.documents_digest(DOCS[:5])}
    with pytest.raises(UserError, match="another documents"):
        distill.cached_headlines(DOCS[:5], _decoder([]), tmp_path, fewer, 4)


def test_distillation_pairs():
    docs, refs, heads = ["d1", "d2", b"d3"], ["r1", "r2", b"r3"], ["t1", " ", "t3"]
    assert distill.distillation_pairs(docs, refs, heads) == (
        ["d1", "d3"],
        ["t1", "t3"],
    )
    assert distill.distillation_pairs(docs, refs, heads, "mixed") == (
        ["d1", "d3", "d1", "d2", "d3"],
        ["t1", "t3", "r1", "r2", "r3"],
    )
    with pytest.raises(UserError, match="Received: distill_targets='word'"):
        distill.distillation_pairs(docs, refs, heads, "word")


def test_closest_hypotheses_pick_by_rouge_and_break_ties_by_rank():
    n_best = [
        "man arrested\tpolice arrest man\tpolice",  # the second is the reference
        "b a\ta b",  # same words; only "a b" shares the reference's bigram
        "x y\ty x",  # nothing in common: the teacher's best
        "only one",
    ]
    references = ["police arrest man", "a b c", "z", "only one here"]
    chosen, overlaps = distill.closest_hypotheses(n_best, references)
    assert chosen == ["police arrest man", "a b", "x y", "only one"]
    # ROUGE-1/2/L F1 of "a b" against "a b c": 0.8, 2/3, 0.8 (and alike
    # of "only one" against "only one here").
    part = (80 + 200 / 3 + 80) / 3
    assert overlaps == pytest.approx([100.0, part, 0.0, part])
    docs = ["d1", "d2", "d3", "d4"]
    assert distill.distillation_pairs(docs, references, n_best, "inter") == (
        docs,
        ["police arrest man", "a b", "x y", "only one"],
    )
    # Freitag et al.: the references, and the teacher's targets not far
    # from them (the third has nothing in common with its reference).
    assert distill.distillation_pairs(
        docs, references, n_best, "inter-mixed", min_overlap=50
    ) == (
        ["d1", "d2", "d4", *docs],
        ["police arrest man", "a b", "only one", *references],
    )
    # Plain headlines are filtered alike: "x y" shares nothing with "z".
    assert distill.distillation_pairs(
        docs[2:], references[2:], ["x y", "only one"], "teacher", min_overlap=1
    ) == (["d4"], ["only one"])
    with pytest.raises(UserError, match=r"Received: distill_min_overlap=101"):
        distill.distillation_pairs(docs, references, n_best, "inter", 101)


def _last_two_words_teacher(path, n_best=False):
    """A SavedModel whose `serving_default` writes a document's last two
    words; with `n_best`, an `n_best` signature lists them, then its first
    two words."""
    import tensorflow as tf

    def joined(words):
        return tf.strings.reduce_join(words.to_tensor(""), 1, separator=" ")

    class Teacher(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, documents):
            words = tf.strings.split(documents)
            return {"normalized_headlines": joined(words[:, -2:])}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def n_best(self, documents):
            words = tf.strings.split(documents)
            lists = tf.stack([joined(words[:, -2:]), joined(words[:, :2])], axis=1)
            return {"normalized_headlines": lists}

    teacher = Teacher()
    signatures = {"serving_default": teacher.serve}
    if n_best:
        signatures["n_best"] = teacher.n_best
    tf.saved_model.save(teacher, str(path), signatures=signatures)
    return path


def test_inter_targets_read_the_teachers_n_best_lists(tmp_path):
    import tensorflow as tf

    docs = ["a b c d", "e f g", "h i j k l"]
    split = tf.data.Dataset.from_tensor_slices((docs, ["c d", "e f", "x"]))
    plain = _last_two_words_teacher(tmp_path / "plain" / "1")
    with pytest.raises(
        UserError, match=r"--n-best 5.*Received: distill_from=.*\['serving_default'\]"
    ):
        distill.distilled_split(split, plain, tmp_path / "run1", "inter")
    # Refused before anything is written: the same folder takes a new export.
    assert not (tmp_path / "run1").exists()
    teacher = _last_two_words_teacher(tmp_path / "teacher" / "1", n_best=True)
    pairs = distill.distilled_split(split, teacher, tmp_path / "run2", "inter")
    # The closest of (last two, first two) words; no overlap: the first.
    assert [s.decode() for _, s in pairs.as_numpy_iterator()] == ["c d", "e f", "k l"]
    cached = (tmp_path / "run2" / "teacher" / "chunk-00000.txt").read_text()
    assert cached == "c d\ta b\nf g\te f\nk l\th i\n"
    # The n-best lists are a cache of their own: not read as headlines.
    with pytest.raises(UserError, match=r"another signature"):
        distill.distilled_split(split, teacher, tmp_path / "run2", "teacher")


def test_distilled_split_uses_the_teachers_headlines_and_its_cache(tmp_path):
    import shutil

    import tensorflow as tf

    teacher = _last_two_words_teacher(tmp_path / "teacher" / "1")
    docs = ["a b c d", "e f g", "h i j k l"]
    split = tf.data.Dataset.from_tensor_slices((docs, ["a b", "e f", "h i"]))
    pairs = distill.distilled_split(split, teacher, tmp_path / "run", "mixed")
    got = [(d.decode(), s.decode()) for d, s in pairs.as_numpy_iterator()]
    assert got[:3] == [("a b c d", "c d"), ("e f g", "f g"), ("h i j k l", "k l")]
    assert got[3:] == [("a b c d", "a b"), ("e f g", "e f"), ("h i j k l", "h i")]
    # The second time, from the cache: the teacher's folder is not read
    # beyond its identity (graph and weights' index), kept in a copy.
    copy = tmp_path / "copy"
    shutil.copytree(teacher, copy)
    shutil.rmtree(teacher / "variables")
    (teacher / "variables").mkdir()
    shutil.copy(copy / "variables" / "variables.index", teacher / "variables")
    again = distill.distilled_split(split, teacher, tmp_path / "run", "teacher")
    assert [s.decode() for _, s in again.as_numpy_iterator()] == ["c d", "f g", "k l"]


def test_member_check_asks_for_rouge_1_above_and_neither_other_below():
    from models.decoding import member_check
    from models.settings.search import SearchOptions

    def check(student, member):
        keys = ("rouge1", "rouge2", "rougeL")
        return member_check.compare(
            dict(zip(keys, student, strict=True)),
            dict(zip(keys, member, strict=True)),
            500,
            SearchOptions(beam_size=1, greedy_end_penalty=1.5),
        )

    assert check((43.14, 21.0, 40.0), (41.42, 21.0, 39.99))["beats_member"]
    # Rounded as recorded: 0.004 is no lead.
    assert not check((41.424, 21.0, 40.0), (41.42, 20.0, 39.0))["beats_member"]
    assert not check((43.14, 20.99, 40.0), (41.42, 21.0, 39.0))["beats_member"]
    lost = check((43.14, 21.0, 39.0), (41.42, 20.0, 39.5))
    assert not lost["beats_member"]
    lines = member_check.verdict_lines(
        lost, "saved_models/t/1", "saved_models/my student", "saved_models/s/2"
    )
    assert lines[0].startswith("THE STUDENT DOES NOT BEAT")
    scored = "R1/R2/RL 43.14 / 21.00 / 39.00 against the member's 41.42 / 20.00 / "
    assert scored in lines[0]
    assert lines[1] == (
        "serve the member instead: python -m models.export --run-dir "
        "saved_models/t/1 --export-dir 'saved_models/my student-member' "
        "--members 1 --search-options saved_models/s/2/search_options.json "
        "--greedy-end-penalty 1.5"
    )
    won = check((43.14, 21.0, 40.0), (41.42, 21.0, 39.99))
    (line,) = member_check.verdict_lines(won, "t/1", "s", "s/1")
    assert line.startswith("the student beats its teacher's first member")


def test_distill_from_a_folder_that_is_no_export(tmp_path):
    with pytest.raises(UserError, match=r"Received: distill_from='.*nothing'"):
        distill.teacher_digest(tmp_path / "nothing")


def test_a_student_keeps_its_teachers_length_when_told():
    from train import main, parse_settings

    # Validation ROUGE chooses the end penalty, a student's too, unless told.
    student = parse_settings(["--distill-from", "saved_models/t/1"])
    assert student.tuning.greedy_length == "rouge"
    assert parse_settings([]).tuning.greedy_length == "rouge"
    told = parse_settings(["--distill-from", "t/1", "--greedy-length", "teacher"])
    assert told.tuning.greedy_length == "teacher"
    with pytest.raises(UserError, match=r"needs `--distill-from`. Received"):
        parse_settings(["--greedy-length", "teacher"])
    assert main(["--greedy-length", "teacher"]) == 2


@pytest.mark.slow
def test_init_from_refuses_a_folder_that_is_not_a_trained_run(tmp_path):
    from models.pipeline import run as run_pipeline
    from train import parse_settings

    (tmp_path / "config.json").write_text("{}")
    settings = parse_settings(
        ["--run-dir", str(tmp_path / "new"), "--init-from", str(tmp_path)]
    )
    with pytest.raises(UserError, match=r"vocab.txt, model.keras missing"):
        run_pipeline(settings)


@pytest.mark.slow
def test_train_py_distills_a_student_from_a_runs_weights_and_exports_it(
    trained, tmp_path
):
    """A student of a teacher that writes each document's last two words,
    started from the shared run's weights (`--init-from`) at learning rate 0:
    it ends with exactly those weights, whatever model flags are given (the
    config and the vocabulary are the shared run's), and its export has
    every signature and its scores."""
    import numpy as np
    import tensorflow as tf

    from models.model.run_folder import load_trained_model

    write_org_data(tmp_path / "data")
    teacher = _last_two_words_teacher(tmp_path / "teacher" / "1")
    source = trained[0] / "run"
    command = train_command(
        tmp_path,
        # One validation, after two batches.
        "--validate-every",
        "16",
        "--train-examples",
        "16",
        "--learning-rate",
        "0",
        "--max-eval-examples",
        "8",
        # The validation loss chooses the best: no ROUGE search to trace.
        "--validation-rouge-examples",
        "0",
        "--distill-from",
        str(teacher),
        # This teacher lists no n-best hypotheses: its headlines are the targets.
        "--distill-targets",
        "teacher",
        "--hidden-size",
        "32",  # the source run's config wins
        "--init-from",
        str(source),
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Distilling from" in result.stderr
    assert f"weights from {source}" in result.stderr
    # A teacher that is any SavedModel with the signatures holds no member.
    assert "holds no trained model" in result.stderr
    documents = (tmp_path / "data" / "org_data" / "train.src.txt").read_text()
    expected = [" ".join(d.split()[-2:]) for d in documents.splitlines()]
    cached = (tmp_path / "run" / "teacher" / "chunk-00000.txt").read_text()
    # TFDS keeps its own order of the split.
    assert sorted(cached.splitlines()) == sorted(expected)
    manifest = json.loads((tmp_path / "run" / "teacher" / "manifest.json").read_text())
    assert manifest["teacher"] == distill.teacher_digest(teacher)

    for name in ("config.json", "vocab.txt"):
        assert (tmp_path / "run" / name).read_text() == (source / name).read_text()
    started, student = (load_trained_model(d) for d in (source, tmp_path / "run"))
    assert len(started.weights) == len(student.weights)
    for a, b in zip(started.weights, student.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)

    export = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert {"serving_default", "greedy", "attention", "length_control"} <= set(
        export.signatures
    )
    metrics = json.loads((tmp_path / "export" / "1" / "metrics.json").read_text())
    assert {"beam", "greedy"} <= set(metrics["systems"])


@pytest.mark.slow
def test_one_command_makes_the_served_student_from_a_plain_export(trained, tmp_path):
    """`train.py --distill-from <export>` alone: the student starts from the
    export's first member (its weights, config and vocabulary), learns from
    the export's `n_best` lists (Seq-Inter), and its export serves greedy
    search by default. At learning rate 0 it keeps the teacher's weights."""
    import numpy as np
    import tensorflow as tf

    from models.model.run_folder import load_trained_model

    write_org_data(tmp_path / "data")
    teacher = trained[0] / "export" / "1"
    command = train_command(
        tmp_path,
        "--distill-from",
        str(teacher),
        *("--validate-every", "16", "--train-examples", "16"),
        *("--learning-rate", "0"),
        *("--validation-rouge-examples", "0", "--max-eval-examples", "8"),
        *("--tune-decoding", "--tune-examples", "8", "--tune-ngram-sizes", "0"),
        *("--tune-length-penalties", "1", "--tune-end-penalties", "0", "3"),
        *("--greedy-length", "teacher"),
    )
    # The student recipe's own search: one beam.
    at = command.index("--beam-size")
    del command[at : at + 2]
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"weights from {teacher}" in result.stderr
    manifest = json.loads((tmp_path / "run" / "teacher" / "manifest.json").read_text())
    assert manifest["signature"] == "n_best"
    # Told so, the end penalty keeps the teacher's mean length.
    tuned = json.loads((tmp_path / "run" / "search_tuning.json").read_text())
    nearest = min(
        abs(r["mean_length"] - tuned["teacher_mean_length"])
        for r in tuned["greedy_grid"]
    )
    row = next(
        r
        for r in tuned["greedy_grid"]
        if r["greedy_end_penalty"] == tuned["chosen"]["greedy_end_penalty"]
    )
    assert abs(row["mean_length"] - tuned["teacher_mean_length"]) == nearest
    options = json.loads(
        (tmp_path / "export" / "1" / "search_options.json").read_text()
    )
    assert options["beam_size"] == 1

    _assert_the_member_is_to_be_served(result, tmp_path / "export" / "1", teacher)

    for name in ("config.json", "vocab.txt"):
        assert (tmp_path / "run" / name).read_text() == (teacher / name).read_text()
    started = keras_model(teacher / "model.keras")
    student = load_trained_model(tmp_path / "run")
    for a, b in zip(started.weights, student.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)

    export = tf.saved_model.load(str(tmp_path / "export" / "1"))
    documents = tf.constant(
        (tmp_path / "data" / "org_data" / "test.src.txt").read_text().splitlines()
    )
    default = export.signatures["serving_default"](documents=documents)
    greedy = export.signatures["greedy"](documents=documents)
    np.testing.assert_array_equal(
        default["headlines"].numpy(), greedy["headlines"].numpy()
    )


def _assert_the_member_is_to_be_served(result, version_dir, teacher):
    """At learning rate 0 the student is its teacher's first member, served
    at a length-chosen end penalty; the member's own penalty is chosen by
    ROUGE-1 on the same grid and pairs: the student cannot beat it, and the
    command says how to export the member as it was scored."""
    from models.export.saved_model import parse_export_settings
    from models.settings.search import SearchOptions

    training = json.loads((version_dir / "training.json").read_text())
    check = training["member_check"]
    assert check["examples"] == 8 and check["beam_size"] == 1
    assert check["student"] == training["validation_check"]["model"]
    assert check["member"]["rouge1"] >= check["student"]["rouge1"]
    assert check["greedy_end_penalty"] in (0.0, 3.0)
    assert check["beats_member"] is False
    last = result.stderr.strip().splitlines()[-2:]
    assert last[0].startswith("[train.py] THE STUDENT DOES NOT BEAT")
    command = last[1].split("serve the member instead: ")[1].split()
    assert command[:3] == ["python", "-m", "models.export"]
    member = parse_export_settings(command[3:])
    assert member.run_dir == str(teacher) and member.members == 1
    assert member.search_overrides == {
        "greedy_end_penalty": check["greedy_end_penalty"]
    }
    # The student's search, but for the member's end penalty.
    assert member.search_options == str(version_dir / "search_options.json")
    SearchOptions(**json.loads(Path(member.search_options).read_text()))


def keras_model(path):
    import keras

    import models.model.summarizer  # noqa: F401  (registers the model with Keras)

    return keras.saving.load_model(path, compile=False)
