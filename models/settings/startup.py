"""Quiet start-up for the command lines: TensorFlow's C++ lines hidden.

TensorFlow 2.20+ writes start-up lines to stderr (oneDNN, CUDA stubs, CPU
features, a failed `cuInit` where there is no GPU) before absl logging is set
up, so `TF_CPP_MIN_LOG_LEVEL` does not hide them. Each command line (`train.py`,
`python -m models.export`, `models.evaluation.evaluate`, `serving`) calls
`import_tensorflow` before anything imports TensorFlow, and offers `--verbose`
to show everything. Importing `models` itself changes nothing.
"""

import contextlib
import dataclasses
import os
import sys

VERBOSE_HELP = "show TensorFlow's start-up lines and C++ logs (hidden by default)"


def add_verbose_flag(parser):
    """Adds `--verbose`: TensorFlow's start-up and C++ log lines shown."""
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)


def verbose_field():
    """The `verbose` field of a command's settings dataclass: `--verbose`
    (`models.settings.flags`), TensorFlow's start-up and C++ log lines shown."""
    return dataclasses.field(
        default=False, metadata={"action": "store_true", "help": VERBOSE_HELP}
    )


@contextlib.contextmanager
def _stderr_to_devnull():
    # File descriptor 2, not `sys.stderr`: the lines come from C++.
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_tensorflow(verbose=False):
    """Imports TensorFlow; unless `verbose`, without its start-up lines.

    Quiet: C++ logs below errors are off (`TF_CPP_MIN_LOG_LEVEL=2` unless
    set), and stderr points at /dev/null while TensorFlow loads and finds its
    devices (which logs a CUDA error on machines without one). An import that
    fails still raises its Python exception. Does nothing more once
    TensorFlow is loaded.
    """
    if verbose or "tensorflow" in sys.modules:
        import tensorflow  # noqa: F401

        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _stderr_to_devnull():
        import tensorflow as tf

        tf.config.list_physical_devices()
