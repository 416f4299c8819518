"""Headline summarization models and data pipeline (TensorFlow backend).

The modules in the order data flows through them; each imports only those
above it:

* `errors`, `layout`, `config`: the one user-error type, the SavedModel
  version-folder rules, and the settings dataclasses (no framework);
* `data/`: Gigaword pairs from TFDS or a local copy, and batches;
* `text`, `features`: in-graph normalization, reserved tokens, word ids;
* `summarizer`, `sampled_softmax`: the Keras model and its one-token step
  (searched by `keras_attn.search`);
* `runs`: a run folder's features and trained model, loaded back;
* `inference`: the exported graph (`HeadlineModule`: the search, greedy or
  beam, its bans, the readable output) and decoding in batches;
* `metrics`: ROUGE, for validation, tuning and evaluation;
* `training`, `tuning`, `export`, `evaluate`, `heatmap`: fitting, choosing
  the decoding settings, writing the SavedModel, scoring it;
* `pipeline`: what `train.py` runs, all of the above in order;
* `serve/`: the TF-Serving-compatible server, which imports none of the
  model code (only `errors` and `layout`).
"""

import importlib.abc
import importlib.util
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Silences the lines TensorFlow's C++ side writes to stderr on import.

    TensorFlow 2.20+ prints its start-up lines (oneDNN, CUDA stubs, CPU
    features, a failed `cuInit` where there is no GPU) before absl logging is
    set up, so `TF_CPP_MIN_LOG_LEVEL` does
    not hide them. File descriptor 2 points at /dev/null while TensorFlow
    loads; Python exceptions still reach the user. `TF_CPP_MIN_LOG_LEVEL=0`
    shows everything.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        sys.stderr.flush()
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
            self.loader.exec_module(module)
            # Finding the devices logs a CUDA error on machines without one.
            module.config.list_physical_devices()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(devnull)


if os.environ["TF_CPP_MIN_LOG_LEVEL"] != "0" and "tensorflow" not in sys.modules:
    sys.meta_path.insert(0, _QuietTensorFlowImport())
