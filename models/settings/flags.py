"""Command-line flags generated from settings dataclasses, and parsed back.

`train.py` offers every field of its settings records (the data source, the
model, training, the run, minimum risk, distillation, decoding and its
tuning, evaluation: `models.settings.train.FLAG_GROUPS`); `python -m
models.export` offers `SearchOptions`' again, to override a run's tuned
settings, and each command line (`models.export.saved_model`,
`models.evaluation.evaluate`, `serving`) is one settings dataclass of its
own. The flags are generated here from the fields, their metadata and
their docstrings, so a new field is a new flag, and parsed back into the
dataclass (`parse_settings`): past the parser, no module reads an
`argparse.Namespace`. The command lines whose flags are no settings
dataclass (`papers/`) check their ranges with `check_flags`.

Plain Python only: the server imports it without any model code.
"""

import argparse
import dataclasses
import inspect
import os
import re
import sys
import typing

# A field whose metadata holds `FLAG: False` is not a flag: the command
# fills it in itself (`parse_settings`'s `extra`).
FLAG = "flag"
# An internal name in a docstring, "one of `CELL_CHOICES`": the help names
# the choices themselves instead.
_CHOICES_NAME = re.compile(r"one of\s+`[A-Z_]+`")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default after its help, unless it is None or False (unset)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class SettingsParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line, without the usage.

    Every flag's default follows its help (`DefaultsHelpFormatter`).
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(**kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def choices(values):
    """Field metadata: the command line offers exactly `values`."""
    return {"choices": values}


def positive(kind):
    """An argparse `type`: `kind(text)`, which must be > 0."""

    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0. Received: {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def non_negative(text):
    """An argparse `type`: a float, which must be >= 0."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0. Received: {text}")
    return value


def check_flags(parser, args, at_least=None, above=None, folders=()):
    """Refuses the first flag of `args` out of its range, in one line
    (`parser.error`), for the command lines whose flags are no settings
    dataclass (`papers/`): checked right after parsing, before any data is
    read.

    Args:
        parser: The parser that read `args` (a `SettingsParser`).
        args: Its `argparse.Namespace`.
        at_least: `{name: least}`: the value, or each of a list's, must be
            >= `least`.
        above: `{name: bound}`: the value must be > `bound`.
        folders: The names whose value must be an existing folder.

    A None value (a flag not given, without a default) passes. `name` is
    the flag's attribute (`max_epochs` for `--max-epochs`).

    Example:

    >>> parser = SettingsParser(prog="run")
    >>> _ = parser.add_argument("--epochs", type=int)
    >>> parser.exit = lambda status, message: print(status, message.strip())
    >>> check_flags(parser, parser.parse_args(["--epochs", "0"]), {"epochs": 1})
    2 run: error: `--epochs` must be >= 1. Received: --epochs=0 (see --help)
    """
    rules = [(n, ">=", least) for n, least in (at_least or {}).items()]
    rules += [(n, ">", bound) for n, bound in (above or {}).items()]
    for name, sign, bound in rules:
        value = getattr(args, name)
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if v is not None and (v < bound if sign == ">=" else v <= bound):
                flag = "--" + name.replace("_", "-")
                parser.error(f"`{flag}` must be {sign} {bound}. Received: {flag}={v}")
    for name in folders:
        value = getattr(args, name)
        if value is not None and not os.path.isdir(value):
            flag = "--" + name.replace("_", "-")
            parser.error(
                f"`{flag}` must be an existing folder. Received: {flag}={value}"
            )


def field_help(cls):
    """`{field: help}` from the `Attributes:` sections of `cls`'s docstring
    and of its dataclass bases'."""
    helps = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            helps.update(_attributes_section(klass.__doc__))
    return helps


def _attributes_section(docstring):
    helps, name, in_section = {}, None, False
    for line in inspect.cleandoc(docstring or "").splitlines():
        entry = re.match(r"    (\w+): (.*)", line)
        if line == "Attributes:":
            in_section = True
        elif in_section and entry:
            name = entry[1]
            helps[name] = entry[2]
        elif in_section and name and line.startswith(" " * 8):
            helps[name] += " " + line.strip()
        elif in_section and line.strip():
            break  # the next section
    return helps


def _with_choices(help_text, choices):
    """`help_text` naming `choices` themselves, never the constant holding them."""
    named = "one of " + ", ".join(str(c) for c in choices)
    words = set(re.findall(r"[\w-]+", help_text or ""))
    if "one of" in (help_text or "") and words >= {str(c) for c in choices}:
        return help_text  # it names them already, each with its meaning
    if not help_text:
        return named[0].upper() + named[1:] + "."
    if _CHOICES_NAME.search(help_text):
        return _CHOICES_NAME.sub(named, help_text)
    return f"{help_text.rstrip('.')}; {named}."


def flag_fields(cls):
    """The fields of the dataclass `cls` that are flags."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get(FLAG, True)]


def add_config_flags(group, cls, unset=False, defaults=None):
    """Adds `--<field-name>` for each field of the dataclass `cls`.

    The help is the field's line in the docstring's `Attributes:`, with its
    choices named; booleans get `--x/--no-x`; a field without a default is a
    required flag; a field's metadata may set any `add_argument` keyword
    (`choices`, `metavar`, `type`, `action`, `help`), or `FLAG: False` to
    offer no flag.

    Args:
        group: An `argparse` parser or argument group.
        cls: The dataclass.
        unset: Every flag defaults to None (the caller keeps the values it
            has for the flags not given) instead of the field's default.
        defaults: `{field: default}` for flags whose default is not the
            field's.
    """
    helps, hints = field_help(cls), typing.get_type_hints(cls)
    for field in flag_fields(cls):
        kind = hints[field.name]
        if type(None) in typing.get_args(kind):  # `int | None`: an int or unset
            (kind,) = [t for t in typing.get_args(kind) if t is not type(None)]
        kwargs = {"help": helps.get(field.name)}
        if field.default is not dataclasses.MISSING:
            kwargs["default"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            kwargs["default"] = field.default_factory()
        else:
            kwargs["required"] = True
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = kind
        kwargs.update(field.metadata)
        if defaults and field.name in defaults:
            kwargs["default"] = defaults[field.name]
        if kwargs.get("action") == "store_true":
            kwargs.pop("type", None)
        if "choices" in kwargs:
            kwargs["help"] = _with_choices(kwargs["help"], kwargs["choices"])
        if unset:
            kwargs["default"] = None
        group.add_argument("--" + field.name.replace("_", "-"), **kwargs)


def given(args, cls):
    """`{field: value}` of the flags of `cls` that `args` holds, None left out."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names and v is not None}


def parse_settings(parser, cls, argv=None, extra=None):
    """Parses `argv` with `parser` into the settings dataclass `cls`.

    Args:
        parser: A parser holding the flags of `cls` (`add_config_flags`).
        cls: The settings dataclass.
        argv: The arguments; `sys.argv[1:]` by default.
        extra: Optional `(args) -> {field: value}` for the fields that are not
            flags (`FLAG: False`), built from the parsed flags.

    Returns:
        An instance of `cls`.
    """
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    values = {f.name: getattr(args, f.name) for f in flag_fields(cls)}
    return cls(**values, **(extra(args) if extra else {}))
