"""Train a headline summarizer, export it as a SavedModel, score it with ROUGE.

    python train.py --data-dir ../shared/data/gigaword_sample

reads TFDS `gigaword` (prepared offline from the `org_data` folder given by
`--data-dir`; downloaded when no folder is given), trains with checkpoints
(rerun the same command to resume), exports `saved_models/<name>/<version>/`
and writes `metrics.json` and attention heatmaps beside it.
"""

import argparse
import dataclasses
import os
import sys

from models.settings.errors import LostWorker, UserError
from models.settings.fit import TrainOptions
from models.settings.flags import add_config_flags, given
from models.settings.model import SummarizerConfig
from models.settings.risk import RiskOptions
from models.settings.search import SearchOptions
from models.settings.startup import add_verbose_flag, import_tensorflow
from models.settings.train import FLAG_GROUPS, GREEDY_LENGTHS, TrainSettings

# Before anything imports Keras (the modules above do not).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


class _HelpFormatter(
    argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter
):
    """The module docstring as written; every flag's default after its help."""


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


def parse_settings(argv=None):
    """`train.py`'s command line (`sys.argv[1:]` by default) as a `TrainSettings`."""
    p = _parser()
    known, _ = p.parse_known_args(argv)
    if known.distill_from:
        p.set_defaults(**STUDENT_DEFAULTS, init_from=known.distill_from)
    args = p.parse_args(argv)
    groups = {
        name: cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
        for name, cls in FLAG_GROUPS.items()
    }
    return TrainSettings(
        **groups,
        model=SummarizerConfig(**given(args, SummarizerConfig)),
        training=TrainOptions(**given(args, TrainOptions)),
        search=SearchOptions(**given(args, SearchOptions)),
        risk=RiskOptions(**given(args, RiskOptions)),
        # The flag's None default: the pipeline chooses from the data.
        choose_normalization=args.normalization is None,
        # The lengths' None defaults: chosen from the data.
        choose_lengths=tuple(
            name
            for name in ("max_source_length", "max_target_length", "max_length")
            if getattr(args, name) is None
        ),
        verbose=args.verbose,
    )


def _parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    _add_data_flags(p.add_argument_group("data"))
    add_config_flags(p.add_argument_group("model"), SummarizerConfig)
    _add_training_flags(p.add_argument_group("training"))
    add_config_flags(
        p.add_argument_group(
            "minimum-risk fine-tuning (after training: the expected ROUGE cost "
            "of each member's beam n-best headlines)"
        ),
        RiskOptions,
    )
    _add_distillation_flags(p.add_argument_group("distillation"))
    _add_decoding_flags(p.add_argument_group("decoding (baked into the export)"))
    g = p.add_argument_group("evaluation")
    g.add_argument("--eval-split", default="test", help="split to score")
    g.add_argument("--max-eval-examples", type=int, help="score only the first N pairs")
    g.add_argument("--skip-eval", action="store_true", help="export without evaluating")
    add_verbose_flag(p)
    return p


def _add_data_flags(g):
    g.add_argument("--dataset", default="gigaword", help="TFDS dataset name")
    g.add_argument(
        "--data-dir",
        help="local copy of the dataset's source: an org_data folder, "
        "its parent, or ggw_data.zip (offline preparation)",
    )
    g.add_argument(
        "--tfds-dir", help="where TFDS keeps prepared datasets (None: TFDS's own)"
    )
    g.add_argument(
        "--document-key", default="document", help="feature holding the text"
    )
    g.add_argument(
        "--summary-key", default="summary", help="feature holding the headline"
    )


def _add_training_flags(g):
    add_config_flags(g, TrainOptions)
    g.add_argument("--name", default="headlines", help="model name")
    g.add_argument(
        "--run-dir", help="checkpoints, logs, vocabulary (None: runs/<name>)"
    )
    g.add_argument(
        "--export-dir", help="SavedModel versions (None: saved_models/<name>)"
    )
    g.add_argument(
        "--max-train-examples", type=int, help="use only the first N training pairs"
    )
    g.add_argument(
        "--strategy",
        choices=("default", "mirrored", "multi_worker"),
        default="default",
        help="tf.distribute strategy",
    )
    g.add_argument(
        "--cpu-devices",
        type=int,
        default=1,
        help="split the CPU into N logical devices (to try --strategy mirrored)",
    )


def _add_distillation_flags(g):
    g.add_argument(
        "--distill-from",
        metavar="TEACHER",
        help="train a student on the headlines of this exported teacher "
        "(saved_models/<name>/<version>), decoded once and cached in the run "
        "folder (models.training.distill). It sets the student recipe's defaults: "
        "--name headlines-student, --distill-targets inter, --init-from "
        "TEACHER, --learning-rate 5e-4, --ensemble 1, --beam-size 1 (the "
        "export serves greedy search)",
    )
    g.add_argument(
        "--distill-targets",
        choices=("teacher", "mixed", "inter", "inter-mixed"),
        default="teacher",
        help="the student's summaries, one of teacher (the teacher's "
        "headlines), mixed (both them and the references), inter (of the "
        "teacher's n best, the one closest to the reference: Seq-Inter; the "
        "teacher's export needs its n_best signature, which exports have by "
        "default) or inter-mixed (both those and the references)",
    )
    g.add_argument(
        "--distill-min-overlap",
        type=float,
        default=0.0,
        metavar="F1",
        help="leave out the teacher's headlines whose mean ROUGE-1/2/L F1 "
        "with their reference (0-100) is below this",
    )
    g.add_argument(
        "--init-from",
        metavar="DIR",
        help="start from a trained run (runs/<name>) or an export "
        "(saved_models/<name>/<version>): its config and vocabulary, and each "
        "member's weights from its member of the same rank (the model flags "
        "are its own); with --distill-from, the teacher's export",
    )


def _add_decoding_flags(g):
    add_config_flags(g, SearchOptions)
    g.add_argument(
        "--tune-decoding",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="choose --length-penalty, --no-repeat-ngram-size and "
        "--greedy-end-penalty by ROUGE-1 on validation examples after training "
        "(--no-tune-decoding keeps the values given)",
    )
    g.add_argument(
        "--tune-examples",
        type=int,
        default=500,
        help="validation examples for --tune-decoding",
    )
    g.add_argument(
        "--tune-length-penalties",
        type=float,
        nargs="+",
        default=[0.6, 1.0, 1.5, 2.0, 2.5, 3.0],
        help="length penalties tried",
    )
    g.add_argument(
        "--tune-ngram-sizes",
        type=int,
        nargs="+",
        default=[1, 2, 3],
        help="n-gram blocking sizes tried",
    )
    g.add_argument(
        "--tune-end-penalties",
        type=float,
        nargs="*",
        default=[0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
        help="greedy search's end penalties tried (none: keep --greedy-end-penalty)",
    )
    g.add_argument(
        "--greedy-length",
        choices=GREEDY_LENGTHS,
        default="rouge",
        help="how the end penalty is chosen: rouge (the best validation "
        "ROUGE-1) or teacher (the mean headline length nearest the "
        "--distill-from teacher's on the same validation documents)",
    )


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
