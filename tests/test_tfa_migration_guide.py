"""docs/tfa-migration.md names only what keras_attn has.

Every code span of the guide outside its TFA column is read as Python. Each
call of a keras_attn name (`ka.beam_search(..., beam_size=3)`), of a method
of a keras_attn class (`cell.split_output(outputs)`) or of a layer built from
one (`AttentionRNN(cell)(..., initial_state=s)`) is checked against its
signature with `inspect`: the name exists, each keyword is a parameter, and
a positional argument written as a bare name is the parameter at that
position. A dotted keras_attn name (`AttentionRNN.cell`) must exist and have
a docstring, and an attribute read from a search's result must be a field of
`DecodingResult`. A rename in keras_attn fails here until the guide follows
it. (The guide's python blocks run in test_docs.py.)
"""

import ast
import builtins
import importlib
import inspect
import re
from pathlib import Path

import keras
import pytest

import keras_attn

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "tfa-migration.md"
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)
# Receivers that are other libraries or plain data, never keras_attn objects.
_FOREIGN = {"keras", "ops", "np", "numpy", "tf", "tfa", "jax", "torch", "math"}
_SEARCHES = {"beam_search", "greedy_search", "sampling_search"}


def _spans(text):
    """`(where, column, code)` of each code span; column is None in prose."""
    text = _FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    header = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            header = None
            cells = [line]
        else:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                continue
            if set(line) <= set("|-: "):
                continue
        for index, cell in enumerate(cells):
            column = header[index] if header is not None else None
            for code in _SPAN.findall(cell):
                yield f"docs/tfa-migration.md:{number}", column, code


def _claims():
    """The guide's code spans that name keras_attn, as parsed expressions.

    Each is `(where, code, tree, strict)`; `strict` is the keras_attn column,
    where every name called must be keras_attn's.
    """
    claims = []
    for where, column, code in _spans(GUIDE.read_text(encoding="utf-8")):
        if column is not None and "tfa" in column.lower():
            continue  # TFA's own names
        strict = column is not None and "keras_attn" in column
        try:
            tree = ast.parse(code, mode="eval")
        except SyntaxError:
            try:  # `beam_size=3` alone: it must say whose argument it is
                ast.parse(f"f({code})", mode="eval")
            except SyntaxError:
                continue
            claims.append(pytest.param(where, code, None, strict, id=code))
            continue
        if any(isinstance(n, (ast.Call, ast.Attribute)) for n in ast.walk(tree)) or (
            isinstance(tree.body, ast.Name) and tree.body.id in keras_attn.__all__
        ):
            claims.append(pytest.param(where, code, tree, strict, id=code))
    return claims


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else None


class _Missing(Exception):
    """A name the guide uses that keras_attn does not have."""


def _dotted(node):
    """`keras_attn.search.DecodingResult` -> the object; `_Missing` if absent."""
    if isinstance(node, ast.Name):
        if node.id in ("ka", "keras_attn"):
            return keras_attn
        if node.id not in keras_attn.__all__:
            raise _Missing(f"keras_attn has no `{node.id}`")
        return getattr(keras_attn, node.id)
    owner = _dotted(node.value)
    if not hasattr(owner, node.attr) and inspect.ismodule(owner):
        try:
            return importlib.import_module(f"{owner.__name__}.{node.attr}")
        except ImportError:
            pass
    if not hasattr(owner, node.attr):
        raise _Missing(f"`{ast.unparse(node.value)}` has no `{node.attr}`")
    return getattr(owner, node.attr)


def _public_classes():
    objects = [getattr(keras_attn, name) for name in keras_attn.__all__]
    return [obj for obj in objects if inspect.isclass(obj)]


def _method(name):
    """The method `name` of a keras_attn class, None if it is Keras' own."""
    if hasattr(keras.Model, name):
        return None
    for cls in _public_classes():
        if callable(getattr(cls, name, None)):
            return getattr(cls, name)
    raise _Missing(f"no keras_attn class has a method `{name}`")


def _style_class(call):
    """`AttentionCellWrapper(..., style="bahdanau")` builds that style's class."""
    style = next((k.value for k in call.keywords if k.arg == "style"), None)
    style = style.value if isinstance(style, ast.Constant) else "luong"
    for cls in _public_classes():
        if issubclass(cls, keras_attn.AttentionCellWrapper) and cls.style == style:
            return cls
    raise _Missing(f"no AttentionCellWrapper class has style={style!r}")


def _callee(call, strict):
    """What `call` calls, or None where it is not keras_attn's."""
    func = call.func
    root = _root(func)
    if isinstance(func, ast.Call):  # `AttentionRNN(cell)(...)`: the layer's call
        cls = _callee(func, strict)
        return cls.call if inspect.isclass(cls) else None
    if root in _FOREIGN or root in dir(builtins):
        return None
    if isinstance(func, ast.Name) and not strict and func.id not in keras_attn.__all__:
        return None  # prose and notes name Keras' and TFA's classes too
    if isinstance(func, ast.Name) or root in ("ka", "keras_attn"):
        target = _dotted(func)
        if target is keras_attn.AttentionCellWrapper:
            return _style_class(call)
        return target
    if isinstance(func, ast.Attribute):
        return _method(func.attr)
    return None


def _accepted(target):
    """`(positional names, keyword names, takes any keyword)` of `target`."""
    params = [
        p for p in inspect.signature(target).parameters.values() if p.name != "self"
    ]
    functions = [target]
    if inspect.isclass(target):
        # A layer passes its **kwargs up to its bases, then to Layer's.
        functions = [c.__init__ for c in target.__mro__ if "__init__" in c.__dict__]
        functions.append(keras.layers.Layer.__init__)
    keywords, any_keyword = set(), False
    for function in functions:
        for p in inspect.signature(function).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                any_keyword = True
            elif p.kind is not p.POSITIONAL_ONLY:
                keywords.add(p.name)
    if inspect.isclass(target):
        any_keyword = False
        keywords |= {"name", "dtype", "trainable", "autocast"}
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p.name for p in params if p.kind in kinds]
    return positional, keywords, any_keyword


def _call_problems(call, strict):
    target = _callee(call, strict)
    if target is None:
        return []
    positional, keywords, any_keyword = _accepted(target)
    name = getattr(target, "__qualname__", ast.unparse(call.func))
    problems = [
        f"{name} has no argument `{k.arg}` (it takes {sorted(keywords)})"
        for k in call.keywords
        if k.arg is not None and not any_keyword and k.arg not in keywords
    ]
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Constant) and arg.value is Ellipsis:
            break  # `...` stands for the arguments the span leaves out
        expected = positional[index] if index < len(positional) else None
        if isinstance(arg, ast.Name) and arg.id != expected:
            problems.append(
                f"argument {index} of {name} is `{expected}`, not `{arg.id}`"
            )
    return problems


def _attribute_problems(node):
    value = node.value
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        fields = keras_attn.search.DecodingResult._fields
        if (
            name in _SEARCHES
            and _root(func) not in _FOREIGN
            and node.attr not in fields
        ):
            return [f"a DecodingResult has no `{node.attr}` (it has {fields})"]
        return []
    root = _root(node)
    if root in ("ka", "keras_attn") or root in keras_attn.__all__:
        if not inspect.getdoc(_dotted(node)):
            return [f"`{ast.unparse(node)}` has no docstring"]
    return []


@pytest.mark.parametrize("where, code, tree, strict", _claims())
def test_the_guide_names_what_keras_attn_has(where, code, tree, strict):
    assert tree is not None, (
        f"{where}: `{code}` names arguments without their function: write "
        f"`function(..., {code})`"
    )
    problems = []
    for node in ast.walk(tree):
        try:
            if isinstance(node, ast.Call):
                problems += _call_problems(node, strict)
            elif isinstance(node, ast.Attribute):
                problems += _attribute_problems(node)
            elif isinstance(node, ast.Name) and node is tree.body:
                _dotted(node)
        except _Missing as missing:
            problems.append(str(missing))
    assert not problems, f"{where}: `{code}`: " + "; ".join(dict.fromkeys(problems))


def test_the_guide_is_checked():
    # The table and the reload section name keras_attn in this many spans at
    # least; a parser that stopped seeing them would pass vacuously.
    claims = _claims()
    assert len(claims) >= 25
    assert any(claim.id.startswith("beam_search(") for claim in claims)
