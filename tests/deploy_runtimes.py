"""Runs an exported artifact in ONNX Runtime, LiteRT or OpenVINO.

Each runner takes the artifact's path and the inputs by name and returns
the outputs by name, as numpy arrays. None imports TensorFlow: they are what
a machine without it runs.
"""

import numpy as np

EXTENSIONS = {"onnx": ".onnx", "litert": ".tflite", "openvino": ".xml"}


def run_onnx(path, inputs):
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs), strict=True))


def run_litert(path, inputs):
    """Runs a LiteRT model: through its signature when it has one (what
    `Model.export` writes), else through its input and output tensors."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    if interpreter.get_signature_list():
        runner = interpreter.get_signature_runner()
        return {k: np.asarray(v) for k, v in runner(**inputs).items()}
    details = interpreter.get_input_details()
    for d in details:
        interpreter.resize_tensor_input(d["index"], inputs[d["name"]].shape)
    interpreter.allocate_tensors()
    for d in details:
        interpreter.set_tensor(d["index"], inputs[d["name"]])
    interpreter.invoke()
    return {
        d["name"]: interpreter.get_tensor(d["index"])
        for d in interpreter.get_output_details()
    }


def run_openvino(model, inputs):
    """Compiles `model` (a path or an `openvino.Model`) for the CPU at f32:
    OpenVINO's CPU default is bf16 where the CPU has AVX-512 BF16."""
    import openvino

    compiled = openvino.Core().compile_model(
        model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    results = compiled(inputs)
    return {o.get_any_name(): np.asarray(results[o]) for o in compiled.outputs}


RUNNERS = {"onnx": run_onnx, "litert": run_litert, "openvino": run_openvino}
