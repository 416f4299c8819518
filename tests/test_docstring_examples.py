"""Every docstring example of keras_attn runs and prints what it shows.

The examples are collected from the imported package (`doctest.DocTestFinder`
on each module of `keras_attn`), so this runs against an installed wheel too.
Each runs in an empty namespace: an example imports what it uses, as a
reader copying it would.
"""

import doctest
import importlib
import pkgutil

import pytest

import keras_attn

_FLAGS = (
    doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.REPORT_ONLY_FIRST_FAILURE
)


def _examples():
    finder = doctest.DocTestFinder()
    found = {}
    for info in pkgutil.walk_packages(keras_attn.__path__, "keras_attn."):
        module = importlib.import_module(info.name)
        for test in finder.find(module, module.__name__, globs={}):
            if test.examples:
                found[test.name] = test
    return [found[name] for name in sorted(found)]


EXAMPLES = _examples()


def test_the_layers_have_examples():
    names = {test.name.rsplit(".", 1)[-1] for test in EXAMPLES}
    assert len(EXAMPLES) >= 13
    assert {"DotAttention", "PointerNetwork", "AttentionRNN"} <= names


def test_every_public_name_has_an_example():
    # `keras_attn.__all__`, and the types its module docstring names, each
    # where it is defined.
    public = {
        getattr(keras_attn, name).__module__ + "." + name for name in keras_attn.__all__
    }
    for group, name in [
        ("layers", "AttentionMemory"),
        ("search", "DecodingResult"),
        ("search", "TokenBan"),
        ("search", "IdBan"),
        ("search", "IdShift"),
    ]:
        exported = getattr(getattr(keras_attn, group), name)
        public.add(f"{exported.__module__}.{name}")
    assert len(public) == 59
    missing = sorted(public - {test.name for test in EXAMPLES})
    assert not missing, f"no docstring example for {missing}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[t.name for t in EXAMPLES])
def test_docstring_example(example):
    report = []
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    failed, attempted = runner.run(example, out=report.append)
    assert attempted == len(example.examples)
    assert failed == 0, "".join(report)
