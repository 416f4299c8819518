"""OpenNMT-py tuned on validation as keras-attn's summarizer is, same data.

`peer_opennmt` runs OpenNMT-py 3.5.1's recipe as its page gives it; this
tunes it as keras-attn's own recipe is tuned. Stages, each resuming after a
kill: `grid` (`grid_points`: dropout x vocabulary, batch 64, keras-attn's
member's size), `extras` (the best grid point with `average_decay`, and
with `share_embeddings`), `search` (beam, length penalty and minimum length
of the best checkpoint of all, on the same dev pairs) and `test` (that
checkpoint and search on the test set, ROUGE with 95% intervals).

Each run has `checkpoint_tuning`'s budget: a checkpoint every
`CHECKPOINT_EXAMPLES`, each decoding the first `--dev-examples` dev sources
(`DEV_DECODING`) for their ROUGE-1 as keras-attn's validation scores it,
`PATIENCE` and `CAP_EXAMPLES`. Runs, decodings and `tuning.json` tables live
in `--work-dir`; the summary goes to `--output`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

from benchmarks import checkpoint_tuning as ct
from benchmarks import peer_opennmt as po

# keras-attn averages its weights with momentum 0.999 (`FitConfig.ema_momentum`),
# i.e. 1e-3 of each update. OpenNMT-py's own average weighs an update by
# max(average_decay, 9 / (step + 10)), which is above 1e-3 up to step 8,990:
# under the cap its documented 1e-4 gives the same average.
AVERAGE_DECAY = 1e-3
# The recipe's decoding (no length penalty) at beam 5, `SearchOptions`' beam
# (keras-attn's own validation decodes greedily: no handicap copied here).
DEV_DECODING = {**po.RECIPE_DECODING, "beam_size": 5}
SEARCH_GRID = {"beam_size": (5, 10), "alpha": (0, 0.5, 1, 2, 3), "min_length": (0, 4)}
DEFAULT_WORK_DIR = Path("~/.cache/keras-attn-peers/opennmt-tuning").expanduser()
DEFAULT_OUTPUT = Path("benchmarks/results/peer_opennmt_tuning.json")
_VOCAB_LOG = re.compile(r"\* src vocab size = (\d+)")


def grid_points():
    """`{name: onmt_train options}` of `checkpoint_tuning.grid_points`."""
    return {
        name: {
            "dropout": dropout,
            **{"src_vocab_size": size, "tgt_vocab_size": size},
            **{"src_words_min_frequency": min_count},
            "tgt_words_min_frequency": min_count,
        }
        for name, (dropout, (size, min_count)) in ct.grid_points().items()
    }


def extra_points(name, options):
    """The grid point `name` with a moving average of its weights, and with
    its encoder's and decoder's embeddings shared."""
    return {
        f"{name}-average": {**options, "average_decay": AVERAGE_DECAY},
        f"{name}-shared": {**options, "share_embeddings": True},
    }


def search_options():
    """`onmt_translate` options of each point of `SEARCH_GRID`, in order."""
    return [
        {"beam_size": beam, "length_penalty": "wu", "alpha": alpha, "min_length": m}
        for beam, alpha, m in itertools.product(*SEARCH_GRID.values())
    ]


def run_config(run_dir, data_dir, vocab, options, cap_steps, every):
    """The recipe's member configuration at batch 64 with `options`, a
    checkpoint and a validation every `every` steps and no early stopping
    of its own (the dev ROUGE-1 decides)."""
    config = po.recipe_config("member", run_dir, data_dir)
    config.pop("early_stopping_criteria")
    config.update(batch_size=ct.BATCH, train_steps=cap_steps, early_stopping=0)
    config.update(save_checkpoint_steps=every, valid_steps=every, keep_checkpoint=-1)
    # Windows timed apart from the validations (`parse_training_log`).
    config.update(report_every=min(po.RECIPE["report_every"], max(1, every // 4)))
    config.update(src_vocab=str(vocab), tgt_vocab=str(vocab), **options)
    return config


def words_at_min_count(vocab, min_count):
    """Words of an `onmt_build_vocab` vocabulary (word, tab, count) that
    occur `min_count` times or more."""
    counts = (line.rsplit("\t", 1)[1] for line in po.read_lines(vocab) if line)
    return sum(int(count) >= min_count for count in counts)


class Run(ct.ScoredRun):
    """One `onmt_train` run of `options` and its `tuning.json` record."""

    def __init__(self, name, options, args):
        super().__init__(Path(args.work_dir) / name, args)
        self.options = options
        self.peer = po.Peer(args.venv, args.threads)
        self.vocab = Path(args.work_dir) / "vocab" / "vocab.txt"

    def checkpoints(self):
        return po.checkpoint_steps(self.dir)

    def command(self, resume):
        config = run_config(
            self.dir,
            self.args.data_dir,
            self.vocab,
            self.options,
            self.cap_steps,
            self.every,
        )
        (self.dir / "config.yml").write_text(json.dumps(config, indent=2))
        command = [self.peer.command("onmt_train"), "-config", self.dir / "config.yml"]
        if resume is not None:
            # A resumed run starts a new average from the checkpoint's
            # averaged weights (OpenNMT-py saves the average alone).
            command += ["-train_from", po.loadable(self.peer, resume)]
        return command

    def env(self):
        return self.peer.env()

    def score(self, path):
        return dev_rouge1(self.args, self.peer, path, self.dir)

    def remove(self, path):
        for name in (path, path.with_suffix(".loadable.pt")):
            name.unlink(missing_ok=True)

    def summary(self):
        """The run's table, best row, vocabulary and training speed."""
        table = self.record["table"]
        log = po.read_training_log(self.dir)
        # A validation comes at a checkpoint, logged with the last reported
        # step before it.
        validations = {
            -(-v[0] // self.every) * self.every: v[1] for v in log.validations
        }
        for row in table:
            row["valid_ppl"] = validations.get(row["step"])
        logged = _VOCAB_LOG.findall((self.dir / "train.log").read_text())
        return {
            "options": self.options,
            "table": table,
            "best": ct.best_row(table),
            "finished": self.finished(),
            "vocab_size_logged": int(logged[-1]) if logged else None,
            "words_at_min_count": words_at_min_count(
                self.vocab, self.options["src_words_min_frequency"]
            ),
            # Training alone, and with the starts, validations and saves.
            "examples_per_s_report_windows": round(log.examples / log.seconds, 2)
            if log.seconds
            else None,
            "examples_per_s_with_validations": self.examples_per_s(),
        }


def dev_sources(args):
    """The first `--dev-examples` dev sources' file and their references."""
    org = Path(args.data_dir) / "org_data"
    source = Path(args.work_dir) / f"dev.{args.dev_examples}.src.txt"
    if not source.exists():
        lines = po.read_lines(org / "dev.src.txt")[: args.dev_examples]
        source.write_text("\n".join(lines) + "\n")
    return source, po.read_lines(org / "dev.tgt.txt")[: args.dev_examples]


def decode(peer, checkpoint, source, output, options):
    """`output`, decoded once: a partial file per process, then renamed."""
    output = Path(output)
    if output.exists():
        return {}
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.{os.getpid()}.partial")
    log = output.parent / "translate.log"
    timing = po.translate(peer, [checkpoint], source, partial, options, ct.BATCH, log)
    partial.rename(output)
    return {"decode_ms_per_headline": timing["ms_per_headline"]}


def dev_rouge1(args, peer, checkpoint, out_dir, options=DEV_DECODING):
    """Dev ROUGE-1 of `checkpoint` with `options`, and its decoding speed."""
    source, references = dev_sources(args)
    output = Path(out_dir) / "dev" / f"{checkpoint.stem}.{po.options_tag(options)}.txt"
    speed = decode(peer, checkpoint, source, output, options)
    rouge = po.score_headlines(po.read_lines(output), references, n_bootstrap=1)
    return round(rouge["rouge1"]["f1"], 4), speed


def search(args, summaries):
    """Each of `search_options` on the best checkpoint; the chosen one."""
    name, best = ct.best_of(summaries)
    checkpoint = Path(args.work_dir) / name / f"model_step_{best['step']}.pt"
    peer, table = po.Peer(args.venv, args.threads), []
    for options in search_options():
        out_dir = Path(args.work_dir) / "search" / name
        rouge1, _ = dev_rouge1(args, peer, checkpoint, out_dir, options)
        table.append({**options, "rouge1": rouge1})
        print(f"[tuning] search {table[-1]}", flush=True)
    chosen = max(table, key=lambda row: row["rouge1"])  # the first of equals
    return {
        "run": name,
        "checkpoint": checkpoint.name,
        "table": table,
        "chosen": chosen,
    }


def test(args, chosen):
    """ROUGE with 95% intervals of the chosen checkpoint and search on the
    test set (its first `--test-examples`)."""
    org, work = Path(args.data_dir) / "org_data", Path(args.work_dir)
    options = {k: v for k, v in chosen["chosen"].items() if k != "rouge1"}
    checkpoint = work / chosen["run"] / chosen["checkpoint"]
    source = work / f"test.{args.test_examples}.src.txt"
    if not source.exists():
        lines = po.read_lines(org / "test.src.txt")[: args.test_examples]
        source.write_text("\n".join(lines) + "\n")
    tag = f"{chosen['run']}.{checkpoint.stem}.{po.options_tag(options)}"
    output = work / "test" / f"{tag}.{args.test_examples}.txt"
    speed = decode(
        po.Peer(args.venv, args.threads), checkpoint, source, output, options
    )
    references = po.read_lines(org / "test.tgt.txt")[: args.test_examples]
    rouge = po.score_headlines(po.read_lines(output), references)
    return {
        **chosen,
        "options": options,
        "examples": len(references),
        "rouge": rouge,
        **speed,
    }


def parse_args(argv=None):
    parser = ct.tuning_parser(
        __doc__.split("\n\n")[0],
        "OpenNMT-py",
        po.DEFAULT_VENV,
        DEFAULT_WORK_DIR,
        DEFAULT_OUTPUT,
    )
    return ct.parse_tuning_args(parser, grid_points(), argv)


def main(argv=None):
    from benchmarks.common import machine_info

    args, stages = parse_args(argv)
    grid = {name: grid_points()[name] for name in args.grid}
    if not args.report:
        po.make_venv(args.venv)
        po.patch_peer(args.venv)
        peer = po.Peer(args.venv, args.threads)
        po.prepare("member", Path(args.work_dir) / "vocab", args.data_dir, peer)
    result = {"opennmt_py": po.OPENNMT_VERSION, "machine": machine_info()}
    result["settings"] = {**ct.budget_settings(args), "dev_decoding": DEV_DECODING}
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
