"""What exports where: every family and search, in every runtime.

One `Case` per family (or search) and format: whether the artifact runs in
that runtime, the option it needs, and the runtime's own message without
that option (or, for a case that cannot run, with every option tried).
docs/deploy.md's table is `table_markdown()` (tests/test_deploy_docs.py
checks it); tests/test_deploy_layers.py and tests/test_deploy_search.py run
every case and assert each message. Imports nothing beyond the standard
library, so that the docs test reads it on every backend.
"""

from typing import NamedTuple

FORMATS = ("onnx", "litert", "openvino")
FORMAT_TITLES = {
    "onnx": "ONNX Runtime",
    "litert": "LiteRT (builtin ops)",
    "openvino": "OpenVINO (f32)",
}
# The score layers' model holds every one of them (one export per format).
SCORE_LAYERS = (
    "DotAttention",
    "ScaledDotAttention",
    "GeneralAttention",
    "ConcatAttention",
    "BahdanauAttention(normalize=True)",
    "NetworkAttention",
)
FAMILIES = {
    "score": "Score layers: " + ", ".join(f"`{name}`" for name in SCORE_LAYERS),
    "recurrent": "`AttentionRNN` with `BahdanauAttentionCell` and `LuongAttentionCell`",
    "coverage_copy": "`CoverageAttention`, `PointerGenerator` and "
    "`pointer_generator_distribution`",
    "pointer_network": "`PointerNetwork`",
    "entity_network": "`PositionEncoder`, `EntityMemoryCell`, `EntityOutput`",
    "greedy": "`greedy_search` in a `tf.function`",
    "beam": "`beam_search` (length penalty, min length, n-gram blocking) in a "
    "`tf.function`",
    "sampling": "`sampling_search` (top-k, a fixed seed) in a `tf.function`",
}
SEARCHES = ("greedy", "beam", "sampling")

# What the runtimes say; the tests assert each is in the error they raise.
TENSOR_LIST_LITERT = "Lowering tensor list ops is failed"
RANDOM_ONNX = "No Op registered for StatelessRandomUniformV2"
RANDOM_OPENVINO = (
    "No conversion rule found for operations: StatelessRandomGetKeyCounter, "
    "StatelessRandomUniformV2"
)
RANDOM_LITERT = "TF Select ops: StatelessRandomGetKeyCounter, StatelessRandomUniformV2"

OPENVINO_TF = "`openvino.convert_model` of the function"
BUILTINS = "`target_spec={'supported_ops': [tf.lite.OpsSet.TFLITE_BUILTINS]}`"
UNROLL = "`unroll=True` (a fixed number of steps)"
LOWEST = "a masked log-probability is float32's lowest, not -inf"
F32 = '`{"INFERENCE_PRECISION_HINT": "f32"}`'
FIXED_BATCH = "a fixed batch size in the input signature"


class Case(NamedTuple):
    """One family (or search) in one format.

    Attributes:
        family: A key of `FAMILIES`.
        format: A key of `FORMAT_TITLES`.
        runs: Whether the artifact runs and matches Keras.
        option: What the export (or the runtime) needs; "" for nothing.
        message: The runtime's message without the option's essential part
            (a loop not unrolled, a batch not fixed); when `runs` is False,
            the message it gives with every option. "" when none.
    """

    family: str
    format: str
    runs: bool
    option: str = ""
    message: str = ""


def _layer_cases(family, litert, openvino, message_litert="", message_ov=""):
    return [
        Case(family, "onnx", True),
        Case(family, "litert", *litert, message_litert),
        Case(family, "openvino", *openvino, message_ov),
    ]


CASES = [
    *_layer_cases("score", (True, BUILTINS), (True, F32)),
    *_layer_cases(
        "recurrent",
        (True, f"{UNROLL}; {BUILTINS}"),
        (True, F32),
        TENSOR_LIST_LITERT,
    ),
    *_layer_cases("coverage_copy", (True, BUILTINS), (True, F32)),
    *_layer_cases(
        "pointer_network",
        (True, f"{FIXED_BATCH}; {BUILTINS}; {LOWEST}"),
        (True, F32),
        TENSOR_LIST_LITERT,
    ),
    *_layer_cases(
        "entity_network",
        (True, f"{UNROLL}; {BUILTINS}"),
        (True, F32),
        TENSOR_LIST_LITERT,
    ),
    Case("greedy", "onnx", True, "tf2onnx, opset 17"),
    Case("greedy", "litert", True, f"from the concrete function; {BUILTINS}"),
    Case("greedy", "openvino", True, f"{OPENVINO_TF}; {F32}"),
    Case("beam", "onnx", True, "tf2onnx, opset 17"),
    Case("beam", "litert", True, f"from the concrete function; {BUILTINS}"),
    Case("beam", "openvino", True, f"{OPENVINO_TF}; {F32}"),
    Case("sampling", "onnx", True, f"tf2onnx, opset 17; {FIXED_BATCH}", RANDOM_ONNX),
    Case("sampling", "litert", False, f"{FIXED_BATCH}; {BUILTINS}", RANDOM_LITERT),
    Case("sampling", "openvino", False, f"{FIXED_BATCH}; {F32}", RANDOM_OPENVINO),
]


# On torch, Keras' `format="onnx"` traces the model with `torch.onnx`: family
# -> `(runs, message)` (tests/test_deploy_torch.py).
TORCH_ONNX = {
    "score": (True, ""),
    "recurrent": (True, ""),
    "pointer_network": (True, ""),
    "entity_network": (True, ""),
    "coverage_copy": (
        False,
        "must be a positive Python int. Received: extended_vocab_size=tensor",
    ),
}


def case(family, format):
    """The `Case` of `family` in `format`."""
    (found,) = [c for c in CASES if (c.family, c.format) == (family, format)]
    return found


def cell(c):
    """A table cell: the status, the option, the message."""
    if c.runs:
        text = "runs" + (f": {c.option}" if c.option else "")
        if c.message:
            text += f" (without it: `{c.message}`)"
        return text
    return f"cannot (with {c.option}): `{c.message}`"


def table_markdown():
    """docs/deploy.md's table: a row per family, a column per format."""
    lines = [
        "| | " + " | ".join(FORMAT_TITLES[f] for f in FORMATS) + " |",
        "|---" * (len(FORMATS) + 1) + "|",
    ]
    for family, title in FAMILIES.items():
        cells = [cell(case(family, f)) for f in FORMATS]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def torch_table_markdown():
    """docs/deploy.md's torch table: ONNX Runtime, a row per family."""
    lines = ["| | ONNX Runtime |", "|---|---|"]
    for family, (runs, message) in TORCH_ONNX.items():
        status = "runs" if runs else f"cannot: `{message}`"
        lines.append(f"| {FAMILIES[family]} | {status} |")
    return "\n".join(lines) + "\n"
