"""A griffe extension: argument tables that match the signatures, with types.

The docstrings are in Keras' style: one `name: description` line per
argument, the type said in words at the start of the description ("Python
int >= 1, ...", "int32 `(B,)`, ...", "Optional boolean `(batch, Tv)`; ...")
and no annotations. Griffe's Google parser reads them as they are, which
leaves three things for the site to fix, here, once the package is loaded:

* an argument line that names several arguments (`a, b: As in f.`) becomes
  one row per argument, each with the shared description;
* each row's default is the signature's (griffe finds none for a grouped
  line, and the table then says "required");
* each row's type is the signature's annotation where there is one, else
  the type the description starts with (`described_type`), else the type of
  the signature's default.

The docstrings themselves are unchanged; tests/test_api_reference.py checks
the tables against `inspect.signature`.
"""

import re

import griffe

_PARAMETER_KINDS = ("parameters", "other parameters")

# The start of a description and the type it says, tried in order; the
# description has its whitespace collapsed and any leading "Optional " cut.
_LEADS = (
    (r"`?\w+\([^`]*\) ->", "callable"),
    (r"Python int\b", "int"),
    (r"int scalar\b", "int scalar"),
    (r"float scalar\b", "float scalar"),
    (r"(int32|int) `\(", "int tensor"),
    (r"(float32|float) `\(", "float tensor"),
    (r"(bool|boolean)( or 0/1)? `\(", "bool tensor"),
    (r"boolean tensor\b", "bool tensor"),
    (r"(Float|float) tensor\b", "float tensor"),
    (r"(Positive )?(float|Float)\b", "float"),
    (r"int, `keras\.random\.SeedGenerator`", "int or SeedGenerator"),
    (r"int\b", "int"),
    (r"(Attention weights|Word embeddings|The coverage)\b", "float tensor"),
    (r"(\w+ )?(mask|boolean mask)\b", "bool tensor"),
    (r"`\(", "tensor"),
    (r"`\"", "str"),
    (r"`\[", "list of tensors"),
    (r"(Masks propagated|Propagated) by Keras, `\[", "list of tensors"),
    (r"(Nested tensors|A tensor or nested structure)", "nested tensors"),
    (r"Sequence of ints", "sequence of int"),
    (r"Ids\b", "sequence of int"),
    (r"Names among", "sequence of str"),
    (r"More processors", "sequence of processors"),
    (r"More arguments of", "dict"),
    (r"Initializer of", "str or initializer"),
    (r"Activation of", "str or callable"),
    (r"(Size|Number|Width|The number|Last dimension) of\b|How many\b", "int"),
    (r"initial state", "list of tensors"),
    (r"The (padding id|end token's id|references' padding id)", "int"),
    (r"Fraction of", "float"),
    (r"Seed\b", "int"),
    (r"Added to\b", "float"),
    (r"[Aa]n? (built )?`(?P<name>[\w.]+)`", None),
    (r"A Keras (RNN cell|layer)", "keras.layers.Layer"),
    (r"The score layer \(a `BaseAttention`", "BaseAttention"),
    (r"layer\b", "keras.layers.Layer"),
    (r"(Whether|If True|If False|Also return|Passed to the cell)\b", "bool"),
)
_LEADS = tuple((re.compile(pattern), type_) for pattern, type_ in _LEADS)
_NONE = re.compile(r"\bor\s+None\b|\bNone\b[:(]|\(None: |\bNone for\b")
_KEYWORDS = re.compile(r"^\*\*")
_STR_OPTION = re.compile(r'`"\w+"`')


_REFERENCE = re.compile(r"^As in\s+`(?P<name>\w+)`")


def described_type(description, default=None):
    """The type a Keras-style argument description starts with, or None.

    Args:
        description: The argument's description.
        default: The signature's default as source text, or None if the
            argument has none.

    Returns:
        A short type (`"int"`, `"float tensor"`, `"BaseAttention"`, ...),
        with `" or None"` when the description or the default allows None;
        None for a description that states no type.
    """
    text = " ".join(description.split())
    optional = text.startswith("Optional ")
    if optional:
        text = text[len("Optional ") :]
    found = None
    for lead, type_ in _LEADS:
        match = lead.match(text)
        if match:
            found = type_ or match.group("name")
            break
    if found is None:
        return None
    if found == "bool" and _STR_OPTION.search(text):
        found = "bool or str"
    first = text.split(". ", 1)[0]
    if (optional or _NONE.search(first) or default == "None") and found != "callable":
        found += " or None"
    return found


def default_type(default):
    """The type of a default given as source text, or None."""
    if default in ("True", "False"):
        return "bool"
    if default is None or default == "None":
        return None
    if re.fullmatch(r"-?\d+", default):
        return "int"
    if re.fullmatch(r"-?[\d.]+(e-?\d+)?", default):
        return "float"
    if default[:1] in "'\"":
        return "str"
    if default.startswith(("(", "[")):
        return "sequence"
    return None


def split_names(name):
    """The argument names of a docstring line, `"a, b"` -> `["a", "b"]`."""
    return [part.strip() for part in name.split(",") if part.strip()]


def _signature_parameter(obj, name):
    """`name`'s parameter in `obj`'s signature or, for a class whose
    `__init__` passes `**kwargs` on, in its bases' (the first that has it)."""
    name = name.lstrip("*")
    owners = [obj, *obj.mro()] if obj.is_class else [obj]
    for owner in owners:
        try:
            parameters = owner.parameters
        except AttributeError:
            return None
        if name in parameters:
            return parameters[name]
        if not any(p.kind is griffe.ParameterKind.var_keyword for p in parameters):
            return None
    return None


def _split_rows(obj, section):
    """One row per argument, with the signature's default and annotation, or
    the type the description starts with."""
    rows = []
    for row in section.value:
        for name in split_names(row.name):
            parameter = _signature_parameter(obj, name)
            default = None if parameter is None else parameter.default
            annotation = row.annotation
            if annotation is None and parameter is not None:
                annotation = parameter.annotation
            if annotation is None and name.startswith("**"):
                annotation = "keyword arguments"
            if annotation is None:
                text = None if default is None else str(default)
                annotation = described_type(row.description, text)
            rows.append(
                griffe.DocstringParameter(
                    name,
                    description=row.description,
                    annotation=annotation,
                    value=default if section.kind.value == "parameters" else None,
                )
            )
    section.value[:] = rows


def _tables(obj):
    if obj.docstring is None:
        return []
    return [s for s in obj.docstring.parsed if s.kind.value in _PARAMETER_KINDS]


def _referenced_type(row, named):
    """The type of the same argument of the function or class that `row`'s
    description refers to (`As in `greedy_search`.`), or None."""
    match = _REFERENCE.match(row.description.strip())
    if match is None or match.group("name") not in named:
        return None
    for section in _tables(named[match.group("name")]):
        for other in section.value:
            if other.name == row.name and other.annotation is not None:
                return other.annotation
            if other.name == row.name and other.value is not None:
                return default_type(str(other.value))
    return None


def _objects(obj):
    yield obj
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_module or member.is_class:
            yield from _objects(member)
        else:
            yield member


def fill_tables(objects):
    """Fills the argument tables of `objects` (griffe objects of a package):
    split rows, the signature's defaults, and a type in every row that
    can have one."""
    objects = [obj for obj in objects if _tables(obj)]
    for obj in objects:
        for section in _tables(obj):
            _split_rows(obj, section)
    named = {obj.name: obj for obj in objects if obj.is_class or obj.is_function}
    for obj in objects:
        for section in _tables(obj):
            for row in section.value:
                if row.annotation is None:
                    row.annotation = _referenced_type(row, named)
                if row.annotation is None and row.value is not None:
                    row.annotation = default_type(str(row.value))


class ArgumentTables(griffe.Extension):
    def on_package(self, *, pkg, **kwargs):
        fill_tables(_objects(pkg))
