"""Train a headline summarizer, export it as a SavedModel, score it with ROUGE.

    python train.py --data-dir ../shared/data/gigaword_sample

reads TFDS `gigaword` (prepared offline from the `org_data` folder given by
`--data-dir`; downloaded when no folder is given), trains with checkpoints
(rerun the same command to resume), exports `saved_models/<name>/<version>/`
and writes `metrics.json` and attention heatmaps beside it.
"""

import argparse
import os
import sys

from models.settings.errors import LostWorker, UserError
from models.settings.flags import DefaultsHelpFormatter, SettingsParser
from models.settings.startup import import_tensorflow
from models.settings.train import add_train_flags, train_settings

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


def main(argv=None):
    try:
        settings = parse_settings(argv)
    except UserError as error:  # a flag's value that its settings refuse
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    import_tensorflow(settings.verbose)
    from models import pipeline

    try:
        pipeline.run(settings)
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
