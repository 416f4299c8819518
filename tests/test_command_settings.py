"""The command lines other than train.py, parsed once into typed settings.

`python -m models.evaluation`, `models.export.saved_model` and `serving` each build a
settings dataclass right after parsing (`models.settings.flags.parse_settings`);
every flag has help naming its choices, and a bad flag is one line, as it
is for the tools of `models.tools`.
"""

import argparse
import re

import pytest

from models.evaluation import evaluate
from models.export import saved_model as export
from models.settings import flags
from models.settings.fit import TrainOptions
from models.settings.model import SummarizerConfig
from models.settings.search import SearchOptions
from models.tools import headline_table, tune_end_penalty
from serving import cli
from serving.settings import ServerConfig, ServeSettings

COMMANDS = {
    "python -m models.evaluation": (
        evaluate.argument_parser,
        evaluate.parse_evaluate_settings,
        ["--model-dir", "m"],
    ),
    "python -m models.export": (
        export.argument_parser,
        export.parse_export_settings,
        ["--run-dir", "r", "--export-dir", "e"],
    ),
    "python -m serving": (
        cli.argument_parser,
        cli.parse_serve_settings,
        ["--model-dir", "m"],
    ),
}


def test_evaluate_settings_are_typed_with_the_defaults():
    settings = evaluate.parse_evaluate_settings(
        ["--model-dir", "m", "--max-examples", "7", "--readable", "--split", "train"]
    )
    assert settings == evaluate.EvaluateSettings(
        model_dir="m", max_examples=7, readable=True, split="train"
    )
    assert settings.batch_size == 64 and settings.n_heatmaps == 4
    assert settings.verbose is False


def test_serve_settings_are_a_server_config():
    settings = cli.parse_serve_settings(
        ["--model-dir", "m", "--port", "9000", "--batch-timeout-ms", "2.5"]
    )
    assert isinstance(settings, ServerConfig)
    assert settings == ServeSettings(model_dir="m", port=9000, batch_timeout_ms=2.5)
    assert settings.host == "127.0.0.1" and settings.log_level == "warning"


def test_export_settings_hold_only_the_search_flags_given():
    settings = export.parse_export_settings(
        ["--run-dir", "r", "--export-dir", "e", "--beam-size", "3", "--no-xla"]
    )
    assert settings.search_overrides == {"beam_size": 3, "xla": False}
    assert settings.members is None and settings.search_options is None
    assert export.parse_export_settings(["--run-dir", "r", "--export-dir", "e"]) == (
        export.ExportSettings(run_dir="r", export_dir="e")
    )


@pytest.mark.parametrize(
    "prog, bad, message",
    [
        (
            "python -m models.evaluation",
            ["--batch-size", "many"],
            "argument --batch-size: invalid int value: 'many'",
        ),
        (
            "python -m models.export",
            ["--dtype-policy", "float8"],
            "argument --dtype-policy: invalid choice: 'float8'",
        ),
        (
            "python -m serving",
            ["--max-queue", "0"],
            "argument --max-queue: must be > 0. Received: 0",
        ),
        ("python -m serving", ["--colour"], "unrecognized arguments: --colour"),
    ],
)
def test_a_bad_flag_is_one_line(prog, bad, message, capsys):
    _, parse, required = COMMANDS[prog]
    with pytest.raises(SystemExit) as exit_info:
        parse(required + bad)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"{prog}: error: {message}")
    assert err.rstrip().endswith("(see --help)")


def test_a_missing_required_flag_is_one_line(capsys):
    with pytest.raises(SystemExit):
        export.parse_export_settings(["--run-dir", "r"])
    err = capsys.readouterr().err
    assert err == (
        "python -m models.export: error: the following arguments are required: "
        "--export-dir (see --help)\n"
    )


def _flag_helps(parser):
    return {
        action.option_strings[-1]: action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
    }


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_every_flag_has_help_naming_its_choices(prog):
    parser = COMMANDS[prog][0]()
    for flag, action in _flag_helps(parser).items():
        assert action.help, f"{prog} {flag} has no help"
        if action.choices:
            assert "one of " + ", ".join(map(str, action.choices)) in action.help
    text = parser.format_help()
    assert not re.search(r"`[A-Z_]{3,}`", text), text


@pytest.mark.parametrize("cls", [SummarizerConfig, TrainOptions, SearchOptions])
def test_train_flags_name_choices_not_constants(cls):
    parser = argparse.ArgumentParser()
    flags.add_config_flags(parser, cls)
    helps = _flag_helps(parser)
    for action in helps.values():
        assert "_CHOICES" not in (action.help or "")
    if cls is SummarizerConfig:
        assert helps["--cell"].help == "Recurrent cell, one of lstm, gru."


@pytest.mark.parametrize(
    "prog, parse, argv, message",
    [
        (
            "python -m models.tools.headline_table",
            lambda argv: headline_table.parse_args(argv),
            ["--model-dir", "m", "--data-dir", "d", "--n", "x"],
            "argument --n: invalid int value: 'x'",
        ),
        (
            "python -m models.tools.tune_end_penalty",
            lambda argv: tune_end_penalty.argument_parser().parse_args(argv),
            ["--run-dir", "r"],
            "the following arguments are required: --output",
        ),
    ],
)
def test_a_tools_bad_flag_is_one_line(prog, parse, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"{prog}: error: {message} (see --help)\n"
