"""The API reference's argument tables match the signatures.

The site's tables are what griffe parses from the Google-style docstrings,
through the extensions mkdocs.yml names (docs/griffe_*.py); this loads the
package as the site does and compares each public name's table with
`inspect.signature`: every documented argument is one the name takes, every
argument it takes is documented, a row says "required" exactly when the
argument has no default, and every row has a type.

griffe comes with the `docs` extra, which the TensorFlow environment has and
the wheel's JAX environment does not; the tables do not depend on the
backend, so this runs once, on TensorFlow.
"""

import ast
import importlib
import inspect
from pathlib import Path

import griffe
import pytest
import yaml

import keras_attn

pytestmark = [pytest.mark.tf_only, pytest.mark.source_tree]

ROOT = Path(__file__).resolve().parents[1]
# The types `keras_attn`'s module docstring names, documented at their
# modules' paths.
MORE_NAMES = (
    "layers.AttentionMemory",
    "search.DecodingResult",
    "search.TokenBan",
    "search.IdBan",
    "search.IdShift",
)
PUBLIC = [*keras_attn.__all__, *MORE_NAMES]


def _python_options():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            return plugin["mkdocstrings"]["handlers"]["python"]["options"]
    raise AssertionError("mkdocs.yml has no mkdocstrings plugin")


def _load_package():
    options = _python_options()
    extensions = griffe.load_extensions(
        *[str(ROOT / path) for path in options["extensions"]]
    )
    return griffe.load(
        "keras_attn",
        search_paths=[str(ROOT)],
        extensions=extensions,
        docstring_parser=options["docstring_style"],
        docstring_options=options["docstring_options"],
    )


PACKAGE = _load_package()


def _python_object(name):
    module, _, attribute = name.rpartition(".")
    module = importlib.import_module(f"keras_attn.{module}" if module else "keras_attn")
    return getattr(module, attribute)


def _table(name, kind="parameters"):
    """The rows of `name`'s table of `kind`, as the site renders them."""
    obj = PACKAGE[name]
    obj = obj.final_target if obj.is_alias else obj
    assert obj.docstring is not None, f"{name} has no docstring"
    return [
        row
        for section in obj.docstring.parsed
        if section.kind.value == kind
        for row in section.value
    ]


def _accepted(cls, name):
    """The parameter `name` of `cls.__init__` or, where it passes `**kwargs`
    on, of the first base's `__init__` that has it; None if none has."""
    for base in cls.__mro__:
        if "__init__" not in vars(base):
            continue
        parameters = inspect.signature(base.__init__).parameters
        if name in parameters:
            return parameters[name]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return None
    return None


def _signature(obj):
    """`obj`'s arguments by their documented names (`**kwargs`, `*args`)."""
    if inspect.isclass(obj):
        # What the site shows: `__init__`'s arguments (a `__new__` that only
        # picks the class takes `*args, **kwargs`).
        if obj.__init__ is object.__init__:
            return {}
        parameters = list(inspect.signature(obj.__init__).parameters.values())[1:]
    else:
        parameters = inspect.signature(obj).parameters.values()
    stars = {inspect.Parameter.VAR_KEYWORD: "**", inspect.Parameter.VAR_POSITIONAL: "*"}
    return {stars.get(p.kind, "") + p.name: p for p in parameters}


@pytest.mark.parametrize("name", PUBLIC)
def test_the_arguments_table_matches_the_signature(name):
    obj = _python_object(name)
    if hasattr(obj, "_fields"):  # a NamedTuple: its fields are its Attributes
        documented = [row.name for row in _table(name, "attributes")]
        assert documented == list(obj._fields)
        return
    rows = {row.name: row for row in _table(name)}
    signature = _signature(obj)
    undocumented = sorted(set(signature) - set(rows))
    assert not undocumented, f"{name}: no Args entry for {undocumented}"
    for argument, row in rows.items():
        parameter = signature.get(argument)
        if parameter is None and inspect.isclass(obj):
            parameter = _accepted(obj, argument)
        assert parameter is not None, f"{name} takes no argument `{argument}`"
        required = parameter.default is inspect.Parameter.empty and parameter.kind in (
            parameter.POSITIONAL_ONLY,
            parameter.POSITIONAL_OR_KEYWORD,
            parameter.KEYWORD_ONLY,
        )
        shown = row.value is None
        assert shown == required, (
            f"{name}: the table says `{argument}` is "
            f"{'required' if shown else f'defaulted to {row.value}'}; "
            f"its signature says {parameter}"
        )
        if parameter.default is not inspect.Parameter.empty:
            assert _same_default(str(row.value), parameter.default), (name, argument)
        assert row.annotation, f"{name}: no type for `{argument}`"


def _same_default(shown, default):
    """Whether the table's default (source text) is the signature's; a name
    (a module constant) is taken as it is."""
    try:
        return ast.literal_eval(shown) == default
    except ValueError:
        return shown.isidentifier()


@pytest.mark.parametrize("name", PUBLIC)
def test_call_arguments_are_arguments_of_call(name):
    obj = _python_object(name)
    rows = [row.name for row in _table(name, "other parameters")]
    if not rows:
        return
    signature = _signature(obj.call)
    assert sorted(set(rows) - set(signature)) == []


def test_grouped_arguments_are_split_and_typed():
    rows = {row.name: row for row in _table("beam_search")}
    for argument in ("min_length", "banned_ids", "no_repeat_ngram_size", "processors"):
        assert argument in rows
        assert " ".join(rows[argument].description.split()) == "As in `greedy_search`."
    assert str(rows["min_length"].value) == "0"
    assert str(rows["banned_ids"].value) == "()"
    assert rows["min_length"].annotation == "int scalar"
    assert rows["start_ids"].annotation == "int tensor"
    assert rows["step"].value is None  # required
    assert [row.name for row in _table("ConcatAttention")] == [
        "units",
        "normalize",
        "use_bias",
        "kernel_initializer",
        "**kwargs",
    ]
