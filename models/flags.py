"""Command-line flags generated from the settings dataclasses of `config`.

`train.py` offers every field of `SummarizerConfig`, `TrainOptions` and
`SearchOptions`; `python -m models.export` offers `SearchOptions`' again, to
override a run's tuned settings. Both generate them here, from the fields and
their docstrings, so a new field is a new flag in both.
"""

import argparse
import dataclasses
import inspect
import re
import typing


def field_help(cls):
    """`{field: help}` from the `Attributes:` section of `cls`'s docstring."""
    helps, name, in_section = {}, None, False
    for line in inspect.cleandoc(cls.__doc__ or "").splitlines():
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


def add_config_flags(group, cls, unset=False):
    """Adds `--<field-name>` for each field of the dataclass `cls`.

    The help is the field's line in the docstring's `Attributes:`; booleans
    get `--x/--no-x`; a field's metadata may add `choices` and `metavar`.

    Args:
        group: An `argparse` parser or argument group.
        cls: The dataclass.
        unset: Every flag defaults to None (the caller keeps the values it
            has for the flags not given) instead of the field's default.
    """
    helps, hints = field_help(cls), typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if type(None) in typing.get_args(kind):  # `int | None`: an int or unset
            (kind,) = [t for t in typing.get_args(kind) if t is not type(None)]
        kwargs = {"default": field.default, "help": helps.get(field.name)}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = kind
        kwargs.update(field.metadata)
        if unset:
            kwargs["default"] = None
        group.add_argument("--" + field.name.replace("_", "-"), **kwargs)


def given(args, cls):
    """`{field: value}` of the flags of `cls` that `args` holds, None left out."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names and v is not None}
