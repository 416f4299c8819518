"""`train.py`'s command line, generated from its settings records.

Every flag is a field of a record (`models.settings.train.FLAG_GROUPS`),
its help the field's; `train_flags.json` beside this file holds each flag's
default, kind, choices and help section as the command line has offered
them, so that a flag moved into a record keeps its name, default and
meaning.
"""

import argparse
import json
from pathlib import Path

import pytest

import train
from models.settings.flags import field_help, flag_fields
from models.settings.train import (
    FLAG_GROUPS,
    TRAIN_DEFAULTS,
    TrainSettings,
    TuningSettings,
)
from models.tools import tune_end_penalty

OFFERED = json.loads((Path(__file__).parent / "train_flags.json").read_text())
KINDS = {
    argparse._StoreAction: "store",
    argparse.BooleanOptionalAction: "boolean",
    argparse._StoreTrueAction: "store_true",
}


def _flags(parser):
    sections = {
        action.dest: group.title.split(" (")[0]
        for group in parser._action_groups
        for action in group._group_actions
    }
    flags = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        entry = {
            "default": action.default,
            "action": KINDS[type(action)],
            "group": sections[action.dest],
        }
        if action.choices:
            entry["choices"] = list(action.choices)
        if action.nargs not in (None, 0):
            entry["nargs"] = action.nargs
        if action.metavar:
            entry["metavar"] = action.metavar
        if entry["action"] == "store":
            entry["type"] = action.type.__name__
        flags[action.option_strings[0]] = (entry, action)
    return flags


def test_every_flag_keeps_its_name_default_and_kind():
    flags = _flags(train.argument_parser())
    assert sorted(flags) == sorted(OFFERED)
    for flag, (entry, _) in flags.items():
        assert entry == OFFERED[flag], flag


def test_every_flag_is_a_field_of_a_record_with_its_help():
    fields = {}
    for _, records in FLAG_GROUPS:
        for _, cls in records:
            helps = field_help(cls)
            for field in flag_fields(cls):
                fields[field.name] = field.metadata.get("help", helps.get(field.name))
    fields["verbose"] = TrainSettings.__dataclass_fields__["verbose"].metadata["help"]
    flags = _flags(train.argument_parser())
    assert sorted(fields) == sorted(action.dest for _, action in flags.values())
    for _, action in flags.values():
        # The field's help, its choices named (`one of lstm, gru`).
        expected = fields[action.dest].split("one of")[0].rstrip(".")
        assert action.help.startswith(expected), action.dest
    assert "add_argument" not in Path(train.__file__).read_text()


def test_the_plain_command_leaves_the_data_choices_unset():
    settings = train.parse_settings([])
    assert settings.model.max_source_length is None
    assert settings.model.max_target_length is None
    assert settings.model.normalization is None
    assert settings.search.max_length is None
    assert settings.data.dataset == "gigaword"
    assert settings.run.run_path() == Path("runs/headlines")
    given = train.parse_settings(
        ["--max-source-length", "48", "--normalization", "general", "--max-length", "9"]
    )
    assert given.model.max_source_length == 48
    assert given.model.normalization == "general"
    assert given.search.max_length == 9


def test_the_records_parsed_are_typed_and_the_student_recipe_applies():
    settings = train.parse_settings(
        ["--tune-ngram-sizes", "2", "3", "--skip-eval", "--summary-key", "title"]
    )
    assert settings.tuning.tune_ngram_sizes == [2, 3]
    assert settings.evaluation.skip_eval is True
    assert settings.data.summary_key == "title"
    student = train.parse_settings(["--distill-from", "saved_models/t/1"])
    assert student.run.name == "headlines-student"
    assert student.distillation.init_from == "saved_models/t/1"
    assert (student.training.learning_rate, student.search.beam_size) == (5e-4, 1)


def test_the_records_built_in_code_hold_the_flags_defaults():
    settings = TrainSettings()
    for _, records in FLAG_GROUPS:
        for name, cls in records:
            record = cls(**TRAIN_DEFAULTS.get(name, {}))
            assert getattr(settings, name) == record
            for field in flag_fields(cls):
                if field.name in ("n_best", "risk_warmup_updates"):
                    continue  # unset, then filled in by the record's checks
                flag = "--" + field.name.replace("_", "-")
                assert getattr(record, field.name) == OFFERED[flag]["default"], flag
    assert settings.search.max_length is None
    assert settings.model.unsettled() == (
        "max_source_length",
        "max_target_length",
        "normalization",
    )


def test_tune_end_penalty_takes_its_defaults_from_the_settings(tmp_path):
    parser = tune_end_penalty.argument_parser()
    args = parser.parse_args(["--run-dir", "r", "--output", str(tmp_path / "o")])
    assert args.examples == TuningSettings().tune_examples
    assert args.penalties == TuningSettings().tune_end_penalties


@pytest.mark.parametrize("flag", ["--strategy", "--distill-targets", "--greedy-length"])
def test_a_bad_choice_is_refused(flag, capsys):
    with pytest.raises(SystemExit):
        train.parse_settings([flag, "nonsense"])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--vocab-size", "abc"], "argument --vocab-size: invalid int value: 'abc'"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_a_flag_argparse_refuses_is_one_line(bad, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_settings(bad)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == f"train.py: error: {message} (see --help)\n"


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--vocab-size", "3"], "`vocab_size` must be >= 4 (the reserved tokens). "),
        (["--hidden-size", "0"], "`hidden_size` must be >= 1. Received: hidden_size=0"),
        (["--dropout", "2"], "`dropout` must be in [0, 1). Received: dropout=2.0"),
        (["--learning-rate", "-1"], "`learning_rate` must be >= 0. "),
        (["--clipnorm", "0"], "`clipnorm` must be > 0. Received: clipnorm=0.0"),
        (["--ema-momentum", "1"], "`ema_momentum` must be in [0, 1). "),
        (["--min-count", "0"], "`min_count` must be >= 1. Received: min_count=0"),
        (["--beam-size", "0"], "`beam_size` must be >= 1. Received: beam_size=0"),
        (["--min-length", "-1"], "`min_length` must be >= 0. "),
        (["--max-length", "0"], "`max_length` must be >= 1, or unset for the run's "),
        (["--shortlist", "-2"], "`shortlist` must be >= 0. Received: shortlist=-2"),
    ],
)
def test_a_value_its_record_refuses_is_one_line_before_training(bad, message, capsys):
    # Refused by the settings records, before TensorFlow or the data load.
    assert train.main(bad) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"train.py: error: {message}"), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize(
    "stage, received",
    [
        (["--risk-updates", "10"], "risk_updates=10"),
        # The student recipe starts from the teacher: --init-from too.
        (
            ["--distill-from", "t/1"],
            "distill_from='t/1', init_from='t/1'",
        ),
        (["--init-from", "runs/x"], "init_from='runs/x'"),
        (["--strategy", "mirrored"], "strategy='mirrored'"),
    ],
)
def test_the_tensorflow_only_stages_are_refused_on_jax(stage, received, capsys):
    assert train.main(["--backend", "jax", *stage]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "train.py: error: `--backend jax` trains without minimum-risk "
        "fine-tuning, distillation, --init-from and tf.distribute strategies, "
        "which run on TensorFlow only: drop them or use --backend tensorflow. "
        "Received: backend='jax', "
    ), err
    assert err.endswith(f"{received}\n"), err
    assert err.count("\n") == 1, err


def test_torch_is_refused_with_its_reason(capsys):
    assert train.main(["--backend", "torch"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "train.py: error: `--backend torch` is not offered: Keras runs the "
        "summarizer eagerly on torch, 0.6 times JAX's examples/s and a "
        "validation search 2.9 times as long (BENCHMARKS.md), and no run on it "
        "has been tested: use --backend jax or tensorflow. "
        "Received: backend='torch'\n"
    )


def test_the_multi_host_flags_are_jaxs(capsys):
    assert train.main(["--num-processes", "2", "--process-id", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "train.py: error: --coordinator, --num-processes and --process-id "
        "start a multi-host run on JAX: add --backend jax, or use --strategy "
        "multi_worker with TF_CONFIG on TensorFlow. Received: coordinator=None, "
        "num_processes=2, process_id=0\n"
    )


def test_a_multi_host_run_needs_all_three_flags():
    from models.settings.errors import UserError
    from models.training import devices

    with pytest.raises(UserError) as error:
        devices.start_processes("127.0.0.1:1", 2, None)
    assert str(error.value) == (
        "A multi-host run needs all of --coordinator, --num-processes and "
        "--process-id. Received: coordinator=127.0.0.1:1, num_processes=2, "
        "process_id=None"
    )


@pytest.mark.tf_only  # `models.text` is TensorFlow's
def test_the_smallest_vocabulary_is_the_reserved_tokens():
    from models import text
    from models.settings.model import RESERVED_TOKENS, SummarizerConfig

    assert RESERVED_TOKENS == len(text.RESERVED)
    assert SummarizerConfig(vocab_size=RESERVED_TOKENS).vocab_size == 4


def test_check_at_least_names_the_first_field_below_its_bound():
    import types

    from models.settings.errors import UserError, check_at_least

    record = types.SimpleNamespace(a=1, b=0, c=-1)
    with pytest.raises(UserError, match=r"^`b` must be >= 1. Received: b=0$"):
        check_at_least(record, [("a", 1), ("b", 1), ("c", 0)])
    check_at_least(record, [("a", 1), ("b", 0)])  # at its bound: accepted


def test_the_help_writes_defaults_as_the_other_commands_do():
    text = train.argument_parser().format_help()
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: 10000)" in text  # --vocab-size
    assert text.startswith("usage: train.py ")
