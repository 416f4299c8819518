"""benchmarks.peer_opennmt's parts that run without OpenNMT-py."""

import json
import os
import sys
from pathlib import Path

import pytest

from benchmarks import peer_opennmt


def test_recipe_config_is_the_summarization_recipe_at_each_size(tmp_path):
    data = tmp_path / "gigaword_sample"
    member = peer_opennmt.recipe_config("member", tmp_path / "run", data)
    for key, value in {
        "encoder_type": "brnn",
        "copy_attn": True,
        "reuse_copy_attn": True,
        "copy_loss_by_seqlength": True,
        "global_attention": "mlp",
        "bridge": True,
        "optim": "adagrad",
        "learning_rate": 0.15,
        "adagrad_accumulator_init": 0.1,
        "max_grad_norm": 2,
        "batch_size": 16,
        "dropout": 0.0,
        "share_vocab": True,
        # The first training step comes without reading the corpus 131 times.
        "bucket_size": 2048,
        "num_workers": 0,
        "gpu_ranks": [],
    }.items():
        assert member[key] == value, key
    # SummarizerConfig's defaults: embedding 128, hidden 256.
    assert (member["word_vec_size"], member["hidden_size"]) == (128, 256)
    opennmt = peer_opennmt.recipe_config("opennmt", tmp_path / "run", data)
    assert (opennmt["word_vec_size"], opennmt["hidden_size"]) == (128, 512)
    # Every validation keeps its checkpoint, and early stopping's window too.
    assert member["save_checkpoint_steps"] == member["valid_steps"]
    assert member["keep_checkpoint"] == member["early_stopping"] + 1
    # Perplexity alone: accuracy falling as perplexity improves is no stop.
    assert member["early_stopping_criteria"] == ["ppl"]
    assert member["data"]["gigaword"]["path_src"] == str(
        data / "org_data" / "train.src.txt"
    )
    assert member["data"]["valid"]["path_tgt"] == str(data / "org_data" / "dev.tgt.txt")


def test_write_config_writes_yaml_that_reads_back(tmp_path):
    path = peer_opennmt.write_config("opennmt", tmp_path / "run", tmp_path)
    assert path == tmp_path / "run" / "config.yml"
    written = json.loads(path.read_text())  # JSON is YAML
    assert written["hidden_size"] == 512
    assert written["save_model"] == str(tmp_path / "run" / "model")
    # A timing run changes the batch alone; the recipe's other options stay.
    path = peer_opennmt.write_config(
        "member", tmp_path / "b64", tmp_path, batch_size=64
    )
    written = json.loads(path.read_text())
    assert (written["batch_size"], written["optim"]) == (64, "adagrad")


def test_size_must_be_known():
    with pytest.raises(ValueError, match="`size` must be one of member, opennmt"):
        peer_opennmt.size_dims("large")


def test_latest_checkpoint_is_the_highest_step(tmp_path):
    assert peer_opennmt.latest_checkpoint(tmp_path) is None
    for name in (
        "model_step_900.pt",
        "model_step_10000.pt",
        "model_step_2000.pt",
        "model_step_2000.pt.tmp",
        "other_step_99999.pt",
        "train.log",
    ):
        (tmp_path / name).write_text("")
    # Numerically highest, not the last by name (900 sorts after 10000).
    assert peer_opennmt.latest_checkpoint(tmp_path) == tmp_path / "model_step_10000.pt"
    assert list(peer_opennmt.checkpoint_steps(tmp_path)) == [900, 2000, 10000]


# The project's ROUGE is the summarizer's (rouge-score), which the
# library-only environment does not install.
@pytest.mark.tf_only
def test_score_headlines_on_two_hand_made_pairs():
    predictions = ["police arrest two men\n", "storm hits coast"]
    references = ["police arrest men", " storm kills two"]
    rouge = peer_opennmt.score_headlines(predictions, references, n_bootstrap=50)
    # ROUGE-1 F1: 2 * (3/4) * (3/3) / (3/4 + 1) = 6/7 and 1/3; their mean.
    assert rouge["rouge1"]["f1"] == pytest.approx(100 * (6 / 7 + 1 / 3) / 2, abs=1e-4)
    # ROUGE-2: "police arrest" of 3 and 2 bigrams, F1 0.4; none in the second.
    assert rouge["rouge2"]["f1"] == pytest.approx(20.0, abs=1e-4)
    assert rouge["rouge1"]["low"] <= rouge["rouge1"]["f1"] <= rouge["rouge1"]["high"]


def test_export_decoding_is_the_exports_search(tmp_path):
    search = {"beam_size": 4, "length_penalty": 3.0, "min_length": 2}
    search.update(max_length=18, no_repeat_ngram_size=1, xla=False)
    (tmp_path / "search_options.json").write_text(json.dumps(search))
    options = peer_opennmt.export_decoding(tmp_path)
    assert options == {
        "beam_size": 4,
        "length_penalty": "wu",
        "alpha": 3.0,
        "min_length": 2,
        "max_length": 18,
        "block_ngram_repeat": 1,
    }
    # Without an export: SearchOptions' defaults.
    defaults = peer_opennmt.export_decoding()
    assert (defaults["beam_size"], defaults["alpha"]) == (5, 1.0)
    assert (defaults["max_length"], defaults["block_ngram_repeat"]) == (20, 3)
    # Each set of options has its own output file.
    assert peer_opennmt.options_tag(options) != peer_opennmt.options_tag(defaults)


def test_peer_commands_run_with_its_threads(tmp_path):
    peer = peer_opennmt.Peer(tmp_path, threads=2)
    assert peer.command("onmt_train") == tmp_path / "bin" / "onmt_train"
    env = peer.env()
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"


@pytest.mark.slow
def test_run_measured_ends_a_process_that_should_stop(tmp_path):
    log = tmp_path / "run.log"
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    peaks = []
    status, wall, peak = peer_opennmt.run_measured(
        command, log, dict(os.environ), should_stop=lambda: True, on_peak=peaks.append
    )
    assert status == -15  # SIGTERM
    assert wall < 30
    assert peak > 0 and peaks == sorted(peaks)


def test_a_later_best_checkpoint_is_decoded_anew(tmp_path, monkeypatch):
    run_dir, data = tmp_path / "run", tmp_path / "data"
    run_dir.mkdir()
    best = [run_dir / "model_step_3200.pt"]
    decoded = []

    def translate(peer, models, source, output, options, batch_size, log):
        decoded.append(Path(models[0]).name)
        Path(output).write_text("a headline\n")

    monkeypatch.setattr(peer_opennmt, "best_checkpoints", lambda run_dir, n: best)
    monkeypatch.setattr(peer_opennmt, "translate", translate)
    first = peer_opennmt.translate_test(run_dir, None, data)
    again = peer_opennmt.translate_test(run_dir, None, data)
    assert decoded == ["model_step_3200.pt"] * 2  # once per decoding, then kept
    assert first == again
    best[:] = [run_dir / "model_step_4800.pt"]
    later = peer_opennmt.translate_test(run_dir, None, data)
    assert decoded[2:] == ["model_step_4800.pt"] * 2
    assert {o["path"] for o in later.values()}.isdisjoint(
        o["path"] for o in first.values()
    )
    assert {o["checkpoint"] for o in later.values()} == {"model_step_4800.pt"}
    # One decoding alone: the recipe's, without an export's search.
    alone = peer_opennmt.translate_test(run_dir, None, data, names=("recipe",))
    assert list(alone) == ["recipe"] and decoded[4:] == []  # already decoded


def test_decodings_must_be_known(capsys):
    args, _ = peer_opennmt.parse_args(["--decodings", "recipe"])
    assert args.decodings == ("recipe",)
    with pytest.raises(SystemExit) as error:
        peer_opennmt.parse_args(["--decodings", "recipe,greedy"])
    assert error.value.code == 2
    assert "Received: greedy" in capsys.readouterr().err


def _site_packages(venv):
    site = venv / "lib" / "python3.11" / "site-packages"
    for path, hunks in peer_opennmt.unified_diff.parse(
        peer_opennmt.COPY_PATCH.read_text()
    ):
        # A file that holds each hunk's old lines where the hunk says.
        lines = []
        for start, old, _ in hunks:
            lines += ["# filler"] * (start - 1 - len(lines)) + old
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text("\n".join(lines) + "\n")
    return site


def test_patch_peer_checks_before_and_after_and_patches_once(tmp_path):
    venv = tmp_path / "venv"
    site = _site_packages(venv)
    diff = peer_opennmt.COPY_PATCH.read_text()
    calls = []

    def checks(venv_path):
        calls.append(peer_opennmt.unified_diff.is_applied(site, diff))
        return {"copy_distributions": {"passed": calls[-1]}}

    result = peer_opennmt.patch_peer(venv, checks=checks)
    assert calls == [False, True]
    assert result == {
        "patch": peer_opennmt.COPY_PATCH.name,
        "unpatched": {"copy_distributions": {"passed": False}},
        "patched": {"copy_distributions": {"passed": True}},
    }
    # Installed and checked: the record is read back, nothing runs again.
    assert peer_opennmt.patch_peer(venv, checks=checks) == result
    assert calls == [False, True]


def test_patch_peer_refuses_a_patch_whose_checks_fail(tmp_path):
    venv = tmp_path / "venv"
    _site_packages(venv)

    def checks(venv_path):
        return {"own_source_vocabulary": {"passed": False}}

    with pytest.raises(RuntimeError, match="fails \\['own_source_vocabulary'\\]"):
        peer_opennmt.patch_peer(venv, checks=checks)
    assert not (venv / peer_opennmt.COPY_CHECKS).exists()
