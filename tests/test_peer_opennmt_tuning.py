"""benchmarks.peer_opennmt_tuning's parts that run without OpenNMT-py."""

import json

import pytest

from benchmarks import peer_opennmt_tuning as tuning


def test_grid_is_dropout_by_vocabulary():
    points = tuning.grid_points()
    assert list(points) == [
        "dropout0.0-vocab50k",
        "dropout0.0-vocab10k",
        "dropout0.3-vocab50k",
        "dropout0.3-vocab10k",
    ]
    assert points["dropout0.3-vocab10k"] == {
        "dropout": 0.3,
        "src_vocab_size": 10_000,
        "tgt_vocab_size": 10_000,
        "src_words_min_frequency": 2,
        "tgt_words_min_frequency": 2,
    }
    assert points["dropout0.0-vocab50k"]["src_words_min_frequency"] == 1
    extras = tuning.extra_points("dropout0.0-vocab50k", points["dropout0.0-vocab50k"])
    assert extras["dropout0.0-vocab50k-average"]["average_decay"] == 1e-3
    assert extras["dropout0.0-vocab50k-shared"]["share_embeddings"] is True
    # Each extra changes one thing of the grid point.
    for options in extras.values():
        assert len(set(options) - set(points["dropout0.0-vocab50k"])) == 1


def test_search_grid_is_beam_by_penalty_by_min_length():
    options = tuning.search_options()
    assert len(options) == 2 * 5 * 2
    assert options[0] == {
        "beam_size": 5,
        "length_penalty": "wu",
        "alpha": 0,
        "min_length": 0,
    }
    assert {o["beam_size"] for o in options} == {5, 10}
    assert {o["min_length"] for o in options} == {0, 4}


def test_dev_decoding_is_the_recipes_at_keras_attns_beam():
    assert tuning.DEV_DECODING == {"beam_size": 5, "length_penalty": "none"}


def test_run_config_overrides_the_recipe(tmp_path):
    options = tuning.grid_points()["dropout0.3-vocab10k"]
    vocab = tmp_path / "vocab" / "vocab.txt"
    config = tuning.run_config(tmp_path / "run", tmp_path, vocab, options, 6970, 391)
    assert config["batch_size"] == 64 and config["train_steps"] == 6970
    assert config["save_checkpoint_steps"] == config["valid_steps"] == 391
    # Every checkpoint kept until scored; no early stopping by perplexity.
    assert config["keep_checkpoint"] == -1
    assert config["early_stopping"] == 0
    assert "early_stopping_criteria" not in config
    assert config["report_every"] == 97  # timed windows between validations
    assert config["dropout"] == 0.3 and config["src_words_min_frequency"] == 2
    assert config["src_vocab"] == config["tgt_vocab"] == str(vocab)
    # The recipe's rest, at keras-attn's member's size.
    assert (config["optim"], config["learning_rate"]) == ("adagrad", 0.15)
    assert (config["word_vec_size"], config["hidden_size"]) == (128, 256)
    assert config["copy_attn"] and config["share_vocab"]
    json.dumps(config)  # written as YAML by way of JSON


def test_words_at_min_count_reads_onmt_build_vocab(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\t30\n.\t7\nrare\t1\nonce\t1\n")
    assert tuning.words_at_min_count(vocab, 1) == 4
    assert tuning.words_at_min_count(vocab, 2) == 2


def test_a_run_resumed_with_other_settings_is_refused(tmp_path):
    args, _ = tuning.parse_args(["--work-dir", str(tmp_path), "--dev-examples", "50"])
    run = tuning.Run("dropout0.0-vocab50k", {}, args)
    run.record["table"] = [{"step": 391, "examples": 25_024, "rouge1": 30}]
    run.save()
    assert tuning.Run("dropout0.0-vocab50k", {}, args).record == run.record
    args, _ = tuning.parse_args(["--work-dir", str(tmp_path)])
    with pytest.raises(SystemExit, match="dev_examples=50"):
        tuning.Run("dropout0.0-vocab50k", {}, args)


def test_the_command_line_is_the_shared_tunings():
    args, stages = tuning.parse_args(
        ["--stages", "grid", "--grid", "dropout0.0-vocab10k"]
    )
    assert stages == ("grid",) and args.grid == ("dropout0.0-vocab10k",)
    assert tuning.parse_args([])[0].grid == tuple(tuning.grid_points())
    assert args.venv == tuning.po.DEFAULT_VENV
    assert args.work_dir == tuning.DEFAULT_WORK_DIR


def test_a_runs_summary_pairs_each_checkpoint_with_its_validation(tmp_path):
    args, _ = tuning.parse_args(["--work-dir", str(tmp_path)])
    run = tuning.Run(
        "dropout0.0-vocab10k", tuning.grid_points()["dropout0.0-vocab10k"], args
    )
    run.dir.mkdir()
    run.record["table"] = [
        {"step": 391, "examples": 25_024, "rouge1": 16.0},
        {"step": 782, "examples": 50_048, "rouge1": 17.5},
    ]
    run.record["train_s"] = {"391": 600.0, "782": 1200.0}
    # Reports every 97 steps: each validation is logged after step 388 or 776.
    window = "acc: 15.8; ppl: 243.6; xent: 5.5; lr: 0.15; sents:    6208; bsz: 1/1/64;"
    lines = ["12:00:00 Start training loop and validate every 391 steps..."]
    for minute, step, ppl in ((1, 388, 369.7), (2, 776, 375.8)):
        lines += [
            f"12:0{minute}:10 Step {step}/ 6970; {window}",
            f"12:0{minute}:20 Validation perplexity: {ppl}",
            f"12:0{minute}:20 Validation accuracy: 12.0",
        ]
    lines.append("12:03:00 * src vocab size = 10004")
    lines = [f"[2026-12-07 {line[:8]},000 INFO] {line[9:]}" for line in lines]
    (run.dir / "train.log").write_text("\n".join(lines) + "\n")
    run.vocab.parent.mkdir()
    run.vocab.write_text("the\t30\nrare\t1\n")
    summary = run.summary()
    assert [row["valid_ppl"] for row in summary["table"]] == [369.7, 375.8]
    assert summary["best"]["step"] == 782 and not summary["finished"]
    assert summary["vocab_size_logged"] == 10004 and summary["words_at_min_count"] == 1
    assert summary["examples_per_s_with_validations"] == round(50_048 / 1200, 2)
