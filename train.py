"""Train a headline summarizer, export it as a SavedModel, score it with ROUGE.

    python train.py --data-dir ../shared/data/gigaword_sample

reads TFDS `gigaword` (prepared offline from the `org_data` folder given by
`--data-dir`; downloaded when no folder is given), trains with checkpoints
(rerun the same command to resume), exports `saved_models/<name>/<version>/`
and writes `metrics.json` and attention heatmaps beside it.
"""

import argparse
import importlib.util
import os
import subprocess
import sys

from models.settings.errors import LostWorker, UserError
from models.settings.flags import DefaultsHelpFormatter, SettingsParser
from models.settings.startup import import_tensorflow
from models.settings.train import add_train_flags, train_settings

# The backend this process was started with, if any: `--backend jax`
# trains in a process started with `KERAS_BACKEND=jax`.
_GIVEN_BACKEND = os.environ.get("KERAS_BACKEND")
# Before anything imports Keras (the modules above do not).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, DefaultsHelpFormatter):
    """The module docstring as written; every flag's default after its help,
    unless it is None or False (unset), as the other commands write it."""


# The student recipe: what `--distill-from` changes of the defaults (a flag
# given on the command line still wins). The student starts from the
# teacher's first member (the export holds its weights, config and
# vocabulary), learns the teacher's n-best hypothesis closest to each
# reference (Seq-Inter) at a lower learning rate, and serves its greedy
# search.
STUDENT_DEFAULTS = {
    "name": "headlines-student",
    "distill_targets": "inter",
    "learning_rate": 5e-4,
    "ensemble": 1,
    "beam_size": 1,
}


def argument_parser():
    """`train.py`'s parser: every flag a field of a settings record
    (`models.settings.train.add_train_flags`); a bad flag is one line."""
    parser = SettingsParser(
        prog="train.py", description=__doc__, formatter_class=_HelpFormatter
    )
    add_train_flags(parser)
    return parser


def parse_settings(argv=None):
    """`train.py`'s command line (`sys.argv[1:]` by default) as a `TrainSettings`."""
    parser = argument_parser()
    known, _ = parser.parse_known_args(argv)
    if known.distill_from:
        parser.set_defaults(**STUDENT_DEFAULTS, init_from=known.distill_from)
    return train_settings(parser.parse_args(argv))


class PreparedOnly(Exception):
    """The data of a `--backend jax` run is prepared; the members train in
    another process, on a machine with JAX."""


def _installed(module):
    return importlib.util.find_spec(module) is not None


def train_on_backend(settings):
    """The training process of `--backend jax`: the members, on the
    prepared arrays, without TensorFlow (`models.training.array_training`)."""
    backend = settings.run.backend
    os.environ["KERAS_BACKEND"] = backend
    from models.training import array_training

    array_training.train_members(settings)
    print(
        f"[train.py] {array_training.NEXT_STEP.format(backend=backend)}",
        file=sys.stderr,
    )


def training_process(argv, backend):
    """What trains the members of `--backend` from a TensorFlow process:
    this command again, in a process of its own on that backend."""
    command = [sys.executable, os.path.abspath(__file__), *argv]

    def train():
        if not _installed(backend):
            print(
                f"[train.py] the data is prepared; {backend} is not installed "
                f"here: run `KERAS_BACKEND={backend} python train.py` with the "
                "same flags where it is, on this run folder, then this command "
                "again here to tune, export and score",
                file=sys.stderr,
            )
            raise PreparedOnly
        environment = {**os.environ, "KERAS_BACKEND": backend}
        code = subprocess.run(command, env=environment, check=False).returncode
        if code == 130:
            raise KeyboardInterrupt
        if code != 0:
            raise UserError(
                f"the {backend} training process failed (exit status {code}); "
                "its lines above say why"
            )

    return train


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        settings = parse_settings(argv)
        backend = settings.run.backend
        if backend != "tensorflow" and (
            _GIVEN_BACKEND == backend or not _installed("tensorflow")
        ):
            return _interrupted_or(lambda: train_on_backend(settings))
        train_elsewhere = (
            None if backend == "tensorflow" else training_process(argv, backend)
        )
    except UserError as error:  # a flag's value that its settings refuse
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    import_tensorflow(settings.verbose)
    from models import pipeline

    return _interrupted_or(lambda: pipeline.run(settings, train_elsewhere))


def _interrupted_or(command):
    """Runs `command`; its errors and a Ctrl-C as `train.py`'s exit status."""
    try:
        command()
    except PreparedOnly:
        return 0
    except LostWorker as error:
        print(f"train.py: error: {error}", file=sys.stderr, flush=True)
        # TensorFlow's shutdown would wait for the lost worker: none of it.
        os._exit(2)
    except UserError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\ntrain.py: interrupted; run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
