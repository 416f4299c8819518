"""An attention decoder with its beam search, run by ONNX Runtime and LiteRT.

Trains the encoder-decoder of `examples/tfa_nmt_tutorial.py` (Luong
attention over an LSTM memory) for a few steps, wraps its beam search in a
`tf.function` from source ids to headline-style ids, converts that function
with tf2onnx and with the TFLite converter (builtin ops only), then runs both
files in a new process that imports neither TensorFlow nor Keras:

    KERAS_BACKEND=tensorflow python -m examples.deploy_beam_search FOLDER

The search and the encoder are inside the files: a client sends padded
source ids and reads back ids, lengths and scores. LiteRT's builtin ops hold
the encoder's and the search's loops once the batch size is fixed in the
signature (TensorFlow's `TensorList` ops, in Keras' recurrent loop, lower to
builtins only for a known batch); ONNX takes any batch.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from examples.command_line import OneLineParser

ONNX_OPSET = 17
BEAM_SIZE = 3
LITERT_BATCH = 8
FILES = {"onnx": "beam_search.onnx", "litert": "beam_search.tflite"}


def to_onnx(function, input_signature, path):
    """Writes the `tf.function` `function` as ONNX (tf2onnx)."""
    import tf2onnx

    from keras_attn.search import writes_by_select

    # Traced inside: tf2onnx cannot convert the `tf.TensorArray`s of a
    # search with extras or a beam history.
    with writes_by_select():
        tf2onnx.convert.from_function(
            function,
            input_signature=input_signature,
            opset=ONNX_OPSET,
            output_path=path,
        )


def to_litert(function, input_signature, path):
    """Writes the `tf.function` `function` as a LiteRT model of builtin ops
    only: the runtimes from the package index have no TensorFlow ops."""
    import tensorflow as tf

    concrete = function.get_concrete_function(*input_signature)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], function)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    Path(path).write_bytes(converter.convert())


def beam_function(translator):
    """`decode(source) -> {"ids", "lengths", "scores"}`, the beam search of a
    `tfa_nmt_tutorial.Translator` over int32 source ids `(B, MAX_WORDS)`."""

    def decode(source):
        result = translator.beam(source, beam_size=BEAM_SIZE)
        return {"ids": result.ids, "lengths": result.lengths, "scores": result.scores}

    return decode


def export(folder, pairs=512, epochs=2, seed=0):
    """Trains the tutorial's model briefly; writes the ONNX and LiteRT files
    and `sources.npy` (held-out sources) to `folder`; returns Keras' result
    on those sources as numpy arrays, and the training's `losses` by epoch."""
    import keras
    import tensorflow as tf

    from examples import tfa_nmt_tutorial as nmt

    keras.utils.set_random_seed(seed)
    model = nmt.build_model(units=32, embedding_dim=16)
    losses = nmt.train(model, nmt.make_pairs(pairs, seed=1), epochs=epochs)
    translator = nmt.Translator(model)
    decode = beam_function(translator)
    sources = nmt.make_pairs(LITERT_BATCH, seed=2)[0]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "sources.npy", sources)
    writers = {"onnx": (None, to_onnx), "litert": (LITERT_BATCH, to_litert)}
    for format, (batch, write) in writers.items():
        spec = [tf.TensorSpec((batch, nmt.MAX_WORDS), tf.int32, name="source")]
        function = tf.function(decode, input_signature=spec)
        write(function, spec, str(folder / FILES[format]))
    result = {k: keras.ops.convert_to_numpy(v) for k, v in decode(sources).items()}
    return dict(result, losses=losses)


def by_role(outputs):
    """`{"ids", "lengths", "scores"}` from a runtime's outputs, told apart by
    dtype and rank (each runtime names them its own way)."""
    found = {}
    for value in outputs:
        value = np.asarray(value)
        if value.dtype.kind == "f":
            found["scores"] = value
        else:
            found["ids" if value.ndim == 2 else "lengths"] = value
    return found


def run_onnx(path, sources):
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return by_role(session.run(None, {session.get_inputs()[0].name: sources}))


def run_litert(path, sources):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], sources)
    interpreter.invoke()
    return by_role(
        interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()
    )


def run_exported(folder):
    """Both files' results on `sources.npy`, from this process, which must
    not have imported TensorFlow: `{"onnx": {...}, "litert": {...},
    "tensorflow_imported": bool}`, lists for JSON."""
    folder = Path(folder)
    sources = np.load(folder / "sources.npy")
    results = {
        "onnx": run_onnx(str(folder / FILES["onnx"]), sources),
        "litert": run_litert(str(folder / FILES["litert"]), sources),
    }
    out = {f: {k: v.tolist() for k, v in r.items()} for f, r in results.items()}
    out["tensorflow_imported"] = "tensorflow" in sys.modules or "keras" in sys.modules
    return out


def run_elsewhere(folder):
    """`run_exported` in a new Python process (no TensorFlow imported)."""
    command = [sys.executable, "-m", "examples.deploy_beam_search", "--run", folder]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=root)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = OneLineParser(
        prog="python -m examples.deploy_beam_search",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("folder", help="where the files are written")
    parser.add_argument(
        "--run", action="store_true", help="only run the files already there"
    )
    args = parser.parse_args(argv)
    needed = [*FILES.values(), "sources.npy"]
    if args.run and (
        missing := [n for n in needed if not (Path(args.folder) / n).is_file()]
    ):
        parser.error(
            f"`folder` must hold {', '.join(needed)} with --run. "
            f"Received: folder={args.folder} (no {missing[0]})"
        )
    if args.run:
        print(json.dumps(run_exported(args.folder)))
        return
    expected = export(args.folder)
    got = run_elsewhere(args.folder)
    for format in FILES:
        same = np.array_equal(got[format]["ids"], expected["ids"])
        print(f"{format}: the same ids as Keras: {same}")
    print(f"TensorFlow imported by the runtimes' process: {got['tensorflow_imported']}")


if __name__ == "__main__":
    main()
