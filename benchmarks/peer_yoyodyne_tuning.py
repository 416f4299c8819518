"""yoyodyne tuned on validation as keras-attn's summarizer is, same data.

`peer_yoyodyne` times yoyodyne's pointer-generator LSTM at keras-attn's
member's size; this trains it to `checkpoint_tuning`'s budget and tunes it
as `peer_opennmt_tuning` tunes OpenNMT-py. Stages, each resuming after a
kill: `grid` (`checkpoint_tuning.grid_points`: dropout x vocabulary),
`extras` (the best grid point with an exponential moving average of its
weights, Lightning's `EMAWeightAveraging` at keras-attn's 0.999; its source
and target embeddings stay tied, as OpenNMT-py's `shared` point has them:
its pointer-generator adds each source word's attention at that word's id
among the targets' and fails when they are apart),
`search` (`--beam-widths`, `BEAM_WIDTHS` by default, on the best
checkpoint of all, on the same dev pairs: its beam has no length penalty or
minimum length) and `test` (that checkpoint and width on the test set, ROUGE
with 95% intervals).

Checkpoints are scored by greedy decoding, as keras-attn's validation
scores: yoyodyne's beam, a Python heap of hypotheses, decodes 0.74 headlines
a second at batch 64, 22 minutes for the 1,000 dev pairs at each checkpoint.
Words outside a grid point's vocabulary are written `<unk>` in its data
(`peer_yoyodyne.write_data`); `<unk>` in a headline scores as a word.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from benchmarks import checkpoint_tuning as ct
from benchmarks import peer_yoyodyne as py
from benchmarks.common import machine_info
from benchmarks.peer_opennmt import read_lines, score_headlines

EMA_DECAY = 0.999  # keras-attn's `FitConfig.ema_momentum`
BEAM_WIDTHS = (1, 5, 10)
DEFAULT_WORK_DIR = Path("~/.cache/keras-attn-peers/yoyodyne-tuning").expanduser()
DEFAULT_OUTPUT = Path("benchmarks/results/peer_yoyodyne_tuning.json")


def grid_points():
    """`{name: options}`: dropout, vocabulary and its minimum count."""
    return {
        name: {"dropout": dropout, "vocabulary": vocabulary}
        for name, (dropout, vocabulary) in ct.grid_points().items()
    }


def extra_points(name, options):
    """The grid point `name` with a moving average of its weights."""
    return {f"{name}-average": {**options, "ema_decay": EMA_DECAY}}


def run_config(run_dir, data_dir, options, cap_steps, every):
    """`peer_yoyodyne.model_config` with `options`, a checkpoint every
    `every` steps (and at the last) and no validation of its own."""
    run_dir = Path(run_dir)
    config = py.model_config(run_dir, cap_steps)
    trainer, model = config["trainer"], config["model"]["init_args"]
    checkpoints = str(run_dir / "checkpoints")
    callbacks = [
        {"class_path": "__main__.LastCheckpoint", "init_args": {"path": checkpoints}}
    ]
    if "ema_decay" in options:
        callbacks.append(
            {
                "class_path": "lightning.pytorch.callbacks.EMAWeightAveraging",
                "init_args": {"decay": options["ema_decay"]},
            }
        )
    # The timing callback last: `run_driver` sets the last one's path.
    clock_path = str(run_dir / "train.clock.json")
    clock = {"class_path": "__main__.Clock", "init_args": {"path": clock_path}}
    trainer.update(callbacks=[*callbacks, clock], limit_val_batches=0)
    model["source_encoder"]["init_args"]["dropout"] = options["dropout"]
    model["decoder_dropout"] = options["dropout"]
    config["data"].update(
        train=str(Path(data_dir) / "train.tsv"), val=str(Path(data_dir) / "dev.tsv")
    )
    config["checkpoint"] = {
        "dirpath": checkpoints,
        "filename": "step{step}",
        "auto_insert_metric_name": False,
        "every_n_train_steps": every,
        "save_top_k": -1,
        "monitor": None,
        "enable_version_counter": False,  # a step's file keeps its name
    }
    return config


def checkpoint_steps(run_dir):
    """`{step: path}` of the `stepN.ckpt` checkpoints of a run."""
    found = (
        (re.fullmatch(r"step(\d+)\.ckpt", path.name), path)
        for path in Path(run_dir, "checkpoints").glob("step*.ckpt")
    )
    return dict(sorted((int(match.group(1)), path) for match, path in found if match))


def vocabulary_data(args, vocabulary):
    """The TSV files of a `(size, min count)` vocabulary, written once."""
    size, min_count = vocabulary
    data = Path(args.work_dir) / f"data-{size}-{min_count}"
    if not (data / "test.tsv").exists():
        py.write_data(args.data_dir, data, size, min_count)
    return data


def dev_pairs(args, data):
    """The first `--dev-examples` dev pairs' TSV and their references."""
    dev = py.first_lines(data / "dev.tsv", args.dev_examples)
    org = Path(args.data_dir) / "org_data"
    return dev, read_lines(org / "dev.tgt.txt")[: args.dev_examples]


def decoded_rouge(
    args, run_dir, checkpoint, source, references, width, tag, n_bootstrap=1
):
    """ROUGE of `checkpoint`'s headlines of `source` at beam `width`, decoded
    once (kept at `run_dir/<tag>.txt`), and its headlines a second."""
    output = Path(run_dir) / f"{tag}.txt"
    speed = {}
    if not output.exists():
        output.parent.mkdir(parents=True, exist_ok=True)
        # yoyodyne writes its predictions batch by batch: kept under their
        # name once whole.
        partial = f"{tag}.partial"
        batches, _, _ = py.decode(
            args.venv, run_dir, source, 64, width, args.threads, partial, checkpoint
        )
        Path(run_dir, f"{partial}.txt").rename(output)
        speed["headlines_per_s"] = round(
            sum(n for _, n in batches) / sum(s for s, _ in batches), 2
        )
    # A beam writes each hypothesis with its score: the best is the first.
    headlines = [line.split("\t")[0] for line in read_lines(output)]
    return score_headlines(headlines, references, n_bootstrap=n_bootstrap), speed


class Run(ct.ScoredRun):
    """One yoyodyne run of `options` and its `tuning.json` record."""

    def __init__(self, name, options, args):
        super().__init__(Path(args.work_dir) / name, args)
        self.options = options

    @property
    def data(self):
        return vocabulary_data(self.args, self.options["vocabulary"])

    def checkpoints(self):
        return checkpoint_steps(self.dir)

    def command(self, resume):
        config = run_config(
            self.dir, self.data, self.options, self.cap_steps, self.every
        )
        (self.dir / "config.yaml").write_text(json.dumps(config, indent=2))
        python = Path(self.args.venv) / "bin" / "python"
        command = [python, "-c", py.DRIVER, "fit", "--config", self.dir / "config.yaml"]
        return command + (["--ckpt_path", resume] if resume else [])

    def env(self):
        threads = {"OMP_NUM_THREADS": str(self.args.threads)}
        return {**os.environ, **threads, "WANDB_MODE": "disabled"}

    def score(self, path):
        source, references = dev_pairs(self.args, self.data)
        tag = f"dev/{path.stem}.width1"
        rouge, speed = decoded_rouge(
            self.args, self.dir, path, source, references, 1, tag
        )
        return round(rouge["rouge1"]["f1"], 4), speed

    def remove(self, path):
        path.unlink(missing_ok=True)

    def summary(self):
        table = self.record["table"]
        return {
            "options": self.options,
            "table": table,
            "best": ct.best_row(table),
            "finished": self.finished(),
            "examples_per_s": self.examples_per_s(),
        }


def search(args, summaries):
    """Each of `args.beam_widths` on the best checkpoint; the chosen one."""
    name, best = ct.best_of(summaries)
    run_dir = Path(args.work_dir) / name
    checkpoint = checkpoint_steps(run_dir)[best["step"]]
    vocabulary = summaries[name]["options"]["vocabulary"]
    source, references = dev_pairs(args, vocabulary_data(args, vocabulary))
    table = []
    for width in args.beam_widths:
        tag = f"search/{checkpoint.stem}.width{width}"
        rouge, speed = decoded_rouge(
            args, run_dir, checkpoint, source, references, width, tag
        )
        table.append(
            {"beam_width": width, "rouge1": round(rouge["rouge1"]["f1"], 4), **speed}
        )
        print(f"[tuning] search {table[-1]}", flush=True)
    chosen = max(table, key=lambda row: row["rouge1"])  # the first of equals
    return {
        **{"run": name, "vocabulary": vocabulary, "checkpoint": checkpoint.name},
        **{"table": table, "chosen": chosen},
    }


def test(args, chosen):
    """ROUGE with 95% intervals of the chosen checkpoint and width on the
    test set (its first `--test-examples`)."""
    run_dir = Path(args.work_dir) / chosen["run"]
    checkpoint = run_dir / "checkpoints" / chosen["checkpoint"]
    data = vocabulary_data(args, chosen["vocabulary"])
    org, n = Path(args.data_dir) / "org_data", args.test_examples
    references = read_lines(org / "test.tgt.txt")[:n]
    width = chosen["chosen"]["beam_width"]
    tag = f"test/{checkpoint.stem}.width{width}.{n}"
    source = py.first_lines(data / "test.tsv", n)
    rouge, speed = decoded_rouge(
        args, run_dir, checkpoint, source, references, width, tag, n_bootstrap=1000
    )
    return {**chosen, "examples": len(references), "rouge": rouge, **speed}


def parse_args(argv=None):
    parser = ct.tuning_parser(
        __doc__.split("\n\n")[0],
        "yoyodyne",
        py.DEFAULT_VENV,
        DEFAULT_WORK_DIR,
        DEFAULT_OUTPUT,
    )
    parser.add_argument(
        "--beam-widths",
        type=_widths,
        default=BEAM_WIDTHS,
        help="comma-separated beam widths the search decodes dev with "
        f"(default: {','.join(map(str, BEAM_WIDTHS))}; 1 is greedy, the fastest)",
    )
    return ct.parse_tuning_args(parser, grid_points(), argv)


def _widths(text):
    widths = tuple(int(width) for width in text.split(",") if width.strip().isdigit())
    if not widths or min(widths) < 1 or len(widths) != len(text.split(",")):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated widths of 1 or more. Received: {text!r}"
        )
    return widths


def main(argv=None):
    args, stages = parse_args(argv)
    if not args.report:
        py.make_venv(args.venv)
    grid = {name: grid_points()[name] for name in args.grid}
    result = {"yoyodyne_version": py.YOYODYNE_VERSION, "machine": machine_info()}
    result["settings"] = {**ct.budget_settings(args), "dev_beam_width": 1}
    stages = ct.run_stages(
        args,
        stages,
        grid,
        make_run=Run,
        extra_points=extra_points,
        search=search,
        test=test,
    )
    result.update(stages)
    path = Path(args.output)
    ct.record_result(path, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
