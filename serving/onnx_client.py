"""Headlines from an ids-level ONNX export, with ONNX Runtime and numpy alone.

    from serving.onnx_client import OnnxSummarizer

    summarizer = OnnxSummarizer("saved_models/headlines-onnx/1")
    summarizer(["Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs."])
    # {"headlines": [...], "normalized_headlines": [...], "scores": array(...)}

The folder is what `python -m models.export --format onnx` writes:
`headlines.onnx`, `vocab.txt` and `onnx_model.json`, whose regexes and
settings make the text steps (`serving.onnx_text`). Neither TensorFlow nor
any model code is imported; `onnxruntime` (the `deploy` extra) only when a
summarizer is made.
"""

import json
from pathlib import Path

import numpy as np

from models.settings.folder_layout import ONNX_CONTRACT_FILE
from serving.onnx_text import TextSteps


def import_onnxruntime():
    """`onnxruntime`, or a one-line error that names the extra."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ImportError(
            "`onnxruntime` must be installed to run an ONNX export "
            '(pip install "keras-attn[deploy]"). '
            f"Received: {type(error).__name__}: {error}"
        ) from None
    return onnxruntime


class OnnxSummarizer:
    """Text in, headlines out, through an ids-level ONNX export.

    Args:
        folder: The export's version folder.
        threads: ONNX Runtime's intra-op threads (0: its default, one per
            core).
    """

    def __init__(self, folder, threads=0):
        onnxruntime = import_onnxruntime()
        folder = Path(folder)
        path = folder / ONNX_CONTRACT_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"`folder` must hold an ONNX export's {ONNX_CONTRACT_FILE}. "
                f"Received: folder={str(folder)!r}"
            )
        self.contract = json.loads(path.read_text(encoding="utf-8"))
        vocabulary = (folder / self.contract["vocabulary"]).read_text(encoding="utf-8")
        self.text = TextSteps(self.contract, vocabulary.rstrip("\n").split("\n"))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(folder / self.contract["model"]),
            options,
            providers=["CPUExecutionProvider"],
        )

    def search_ids(self, source_ids, source_lengths):
        """The model's outputs by name, as numpy arrays."""
        names = [o.name for o in self.session.get_outputs()]
        inputs = {"source_ids": source_ids, "source_lengths": source_lengths}
        return dict(zip(names, self.session.run(names, inputs), strict=True))

    def __call__(self, documents):
        """`{"headlines", "normalized_headlines", "scores"}` of `documents`
        (a list of str): the SavedModel's `serving_default` outputs."""
        source_ids, lengths, sources = self.text.encode(documents)
        out = self.search_ids(source_ids, lengths)
        rows = [
            self.text.headline(ids, length, attention, source)
            for ids, length, attention, source in zip(
                out["ids"], out["lengths"], out["attention"], sources, strict=True
            )
        ]
        return {
            "headlines": [headline for headline, _ in rows],
            "normalized_headlines": [normalized for _, normalized in rows],
            "scores": np.asarray(out["scores"]),
        }
