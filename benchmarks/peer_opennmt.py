"""OpenNMT-py's Gigaword recipe against keras-attn's summarizer, same data.

Runs OpenNMT-py 3.5.1's documented summarization recipe (`RECIPE`) on the
shared Gigaword sample at two sizes, its own (embedding 128, hidden 512) and
keras-attn's member's, so that the recipe is told apart from the size. Each
stage resumes: `venv` (OpenNMT-py in a venv outside the project), `config`
(the recipe's YAML and the shared vocabulary), `train` (`onmt_train` to its
early stop, resuming from its latest checkpoint; its log, read by
`parse_training_log`, decides the end), `translate` (the test set by the
best checkpoint with the page's decoding and the export's: `--decodings`),
`score` (ROUGE as keras-attn's exports are scored) and `timing`
(headlines/s at batch 64, latency at batch 1; with `--train-batch-size`,
training examples/s at that batch too: `training_speed`). Results go to
`--output` (JSON); the commands are in BENCHMARKS.md.

The `venv` stage patches OpenNMT-py's copy attention (`COPY_PATCH`, issue
76): training weighted each copy distribution by another position's gate,
the beam collapsed a sentence's copies with another sentence's source
vocabulary once one had ended, and `-replace_unk` crashed on RNN models.
`opennmt_copy_checks` runs before and after the patch; both results go to
`--output`. Not 2.3.0, the last release before the batch-first rewrite:
it installs beside torch 2.13 (torchtext 0.5.0), trains and translates, but
its trainer validates only on a GPU (`trainer.py`: `self.n_gpu > 0`), so
on a CPU it neither reports a validation perplexity nor stops early.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks import unified_diff
from benchmarks.common import merge, run_measured
from benchmarks.opennmt_training_log import parse_training_log, training_finished
from models.settings.json_files import read_json, write_json

OPENNMT_VERSION = "3.5.1"
TORCH_VERSION = "2.13.0"
# What OpenNMT-py's modules import (its own pins are for an older torch), at
# the versions this comparison ran with.
PEER_PACKAGES = (
    "ConfigArgParse==1.9.0 PyYAML==6.0.4 sacrebleu==2.6.0 six==1.17.0 waitress==3.0.2 "
    "Flask==3.1.3 pyonmttok==1.38.1 RapidFuzz==3.14.6 pyahocorasick==2.3.1 "
    "spacy==3.8.18 fasttext-wheel==0.9.2"
).split()
DEFAULT_VENV = Path("~/.cache/keras-attn-peers/opennmt-venv").expanduser()
DEFAULT_WORK_DIR = Path("~/.cache/keras-attn-peers/opennmt-runs").expanduser()
DEFAULT_OUTPUT = Path("benchmarks/results/peer_opennmt.json")
STAGES = ("venv", "config", "train", "translate", "score", "timing")
# Ours: OpenNMT-py 3.5.1's copy attention fixed, applied at
# install; `opennmt_copy_checks` shows each bug before and its fix after.
COPY_PATCH = (
    Path(__file__).parent / "peer_patches" / "opennmt_3.5.1_copy_attention.diff"
)
COPY_CHECKS = "copy_attention_checks.json"  # in the venv: the checks' results

# config-rnn-summarization.yml and Summarization.md's training options; its
# Gigaword vocabulary: shared, 50,000 words, no length filter.
RECIPE = {
    **{"encoder_type": "brnn", "layers": 1, "global_attention": "mlp", "bridge": True},
    **{"copy_attn": True, "reuse_copy_attn": True, "copy_loss_by_seqlength": True},
    **{"optim": "adagrad", "learning_rate": 0.15, "adagrad_accumulator_init": 0.1},
    **{"max_grad_norm": 2, "batch_size": 16, "dropout": 0.0, "seed": 3435},
    **{"report_every": 100, "train_steps": 100000},
    **{"share_vocab": True, "src_vocab_size": 50000, "tgt_vocab_size": 50000},
    **{"src_seq_length": 10000, "tgt_seq_length": 10000},
}
# Neither recipe file sets these: 1,600 steps of 16 is 25,600 examples,
# about keras-attn's own validation interval (`validate_every`), and the
# patience is keras-attn's too. The best checkpoint is by validation
# perplexity alone: with OpenNMT-py's default criteria (perplexity and
# accuracy) a validation whose perplexity improves while its accuracy falls
# counts as stalled, and five of them stop a run that is still improving.
VALIDATION = {
    **{"valid_steps": 1600, "valid_batch_size": 64},
    **{"early_stopping": 5, "early_stopping_criteria": ["ppl"]},
}
# CPU only. OpenNMT-py's defaults (a bucket of 262,144 examples filled before
# the first step, 2 loader processes) reread a small corpus for many minutes.
MACHINE = {"world_size": 1, "gpu_ranks": [], "bucket_size": 2048, "num_workers": 0}
SIZES = ("member", "opennmt")
# Summarization.md's Gigaword results: beam 10, "no penalties".
RECIPE_DECODING = {"beam_size": 10, "length_penalty": "none"}
# The test set's decodings: the recipe's and keras-attn's export's search.
DECODINGS = ("recipe", "export")


def size_dims(size):
    """`(word_vec_size, hidden_size)` of `size`, one of `SIZES`."""
    if size == "opennmt":
        return 128, 512
    if size == "member":
        from models.settings.model import SummarizerConfig

        config = SummarizerConfig()
        return config.embedding_dim, config.hidden_size
    raise ValueError(f"`size` must be one of {', '.join(SIZES)}. Received: {size=}")


def export_decoding(export_dir=None):
    """keras-attn's search as `onmt_translate` options: an export's (its
    `search_options.json`, chosen on validation) or `SearchOptions`'."""
    from models.settings.folder_layout import SEARCH_OPTIONS_FILE
    from models.settings.search import SearchOptions

    search = dataclasses.asdict(SearchOptions())
    if export_dir is not None:
        search.update(json.loads((Path(export_dir) / SEARCH_OPTIONS_FILE).read_text()))
    return {
        "beam_size": search["beam_size"],
        # OpenNMT-py's `wu` is GNMT's ((5 + n) / 6) ** alpha, as keras-attn's.
        "length_penalty": "wu",
        "alpha": search["length_penalty"],
        "min_length": search["min_length"],
        "max_length": search["max_length"],
        "block_ngram_repeat": search["no_repeat_ngram_size"],
    }


def recipe_config(size, run_dir, data_dir):
    """The `onmt_train` / `onmt_build_vocab` configuration, as a dict."""
    run_dir, org = Path(run_dir), Path(data_dir).resolve() / "org_data"
    word_vec_size, hidden_size = size_dims(size)
    return {
        **RECIPE,
        **VALIDATION,
        **MACHINE,
        "word_vec_size": word_vec_size,
        "hidden_size": hidden_size,
        "keep_checkpoint": VALIDATION["early_stopping"] + 1,
        "save_checkpoint_steps": VALIDATION["valid_steps"],
        "save_model": str(run_dir / "model"),
        "save_data": str(run_dir / "samples"),
        "src_vocab": str(run_dir / "vocab.txt"),
        "tgt_vocab": str(run_dir / "vocab.txt"),
        "overwrite": False,
        "data": {
            "gigaword": {
                "path_src": str(org / "train.src.txt"),
                "path_tgt": str(org / "train.tgt.txt"),
                "transforms": ["filtertoolong"],
                "weight": 1,
            },
            "valid": {
                "path_src": str(org / "dev.src.txt"),
                "path_tgt": str(org / "dev.tgt.txt"),
                "transforms": ["filtertoolong"],
            },
        },
    }


def write_config(size, run_dir, data_dir, **overrides):
    """Writes `run_dir/config.yml` (JSON is YAML), the recipe's but for
    `overrides`, and returns its path."""
    path = Path(run_dir) / "config.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {**recipe_config(size, run_dir, data_dir), **overrides}
    path.write_text(json.dumps(config, indent=2))
    return path


def checkpoint_steps(run_dir):
    """`{step: path}` of the `model_step_N.pt` checkpoints in `run_dir`."""
    found = (
        (re.fullmatch(r"model_step_(\d+)\.pt", p.name), p)
        for p in Path(run_dir).iterdir()
    )
    return dict(sorted((int(m.group(1)), p) for m, p in found if m))


def latest_checkpoint(run_dir):
    """The checkpoint of the highest step in `run_dir`, or None."""
    steps = checkpoint_steps(run_dir)
    return steps[max(steps)] if steps else None


@dataclasses.dataclass(frozen=True)
class Peer:
    """OpenNMT-py's venv, and the threads its commands run with (torch's
    OpenMP threads spin-wait for a descheduled one on shared cores)."""

    venv: Path
    threads: int = 1

    def command(self, name):
        return Path(self.venv) / "bin" / name

    def env(self):
        # OpenNMT-py 3.5.1's checkpoints hold an `argparse.Namespace`, which
        # torch's default `weights_only` load refuses; these are its own.
        threads = {"OMP_NUM_THREADS": str(self.threads)}
        return {**os.environ, **threads, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


# OpenNMT-py 3.5.1 saves a copy-attention model's generator apart from the
# model and then looks for it inside (its issue #2503): neither `-train_from`
# nor `onmt_translate` loads its own checkpoint. This copy puts it inside.
LOADABLE = """import sys, torch
checkpoint = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
for key, value in (checkpoint.get("generator") or {}).items():
    checkpoint["model"]["generator." + key] = value
checkpoint["generator"] = None
torch.save(checkpoint, sys.argv[2])
"""
# `onmt_translate` as OpenNMT-py 3.5.1 runs it, but with the copy keys
# (`src_map`) in the batches, which its inference leaves out for every model.
TRANSLATE = """import sys
from onmt.bin.translate import _get_parser
from onmt.constants import CorpusTask
from onmt.inference_engine import InferenceEnginePY
from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
from onmt.utils.parse import ArgumentParser as Parse
opt = _get_parser().parse_args(sys.argv[1:])
for check in ("validate_translate_opts", "_get_all_transform_translate",
              "_validate_transforms_opts", "validate_translate_opts_dynamic"):
    getattr(Parse, check)(opt)
engine = InferenceEnginePY(opt)
engine._translate(build_dynamic_dataset_iter(
    opt, engine.transforms_cls, engine.vocabs, task=CorpusTask.INFER, copy=True))
"""


def loadable(peer, checkpoint):
    """The copy of `checkpoint` that OpenNMT-py loads (`LOADABLE`), made once."""
    checkpoint = Path(checkpoint)
    copy = checkpoint.with_suffix(".loadable.pt")
    if not copy.exists():
        partial = checkpoint.with_suffix(".partial")
        command = [peer.command("python"), "-c", LOADABLE, checkpoint, partial]
        subprocess.run(command, check=True, env=peer.env())
        partial.rename(copy)
    return copy


def make_venv(venv):
    """Creates `venv` with OpenNMT-py and CPU torch unless it has them."""
    venv = Path(venv)
    if (venv / "bin" / "onmt_train").exists():
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    # The CPU wheel first, so that no later install brings another torch.
    subprocess.run([*pip, f"torch=={TORCH_VERSION}", "numpy"], check=True)
    subprocess.run([*pip, "--no-deps", f"OpenNMT-py=={OPENNMT_VERSION}"], check=True)
    subprocess.run([*pip, *PEER_PACKAGES], check=True)


def copy_checks(venv):
    """`opennmt_copy_checks`' results on `venv`'s OpenNMT-py, `{check: {...}}`."""
    code = "from benchmarks.opennmt_copy_checks import main; main()"
    done = subprocess.run(
        [str(Path(venv) / "bin" / "python"), "-W", "ignore", "-c", code],
        **{"check": True, "capture_output": True, "text": True},
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=Path(__file__).resolve().parents[1],
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def patch_peer(venv, checks=copy_checks):
    """Applies `COPY_PATCH` to `venv`'s OpenNMT-py once, the checks run
    before and after it; returns `{"patch", "unpatched", "patched"}`, kept
    in the venv (`COPY_CHECKS`)."""
    record = Path(venv) / COPY_CHECKS
    if record.exists():
        return read_json(record)
    site = next(Path(venv).glob("lib/python*/site-packages"))
    diff = COPY_PATCH.read_text()
    if unified_diff.is_applied(site, diff):
        raise RuntimeError(f"{site} is patched but has no {COPY_CHECKS}: reinstall.")
    result = {"patch": COPY_PATCH.name, "unpatched": checks(venv)}
    unified_diff.apply(site, diff)
    result["patched"] = checks(venv)
    failed = [name for name, check in result["patched"].items() if not check["passed"]]
    if failed:
        raise RuntimeError(f"The patched OpenNMT-py fails {failed}: {result}")
    write_json(record, result)
    return result


def record_peak(run_dir, mib=0.0):
    """The highest training peak RSS so far, kept in the run's `state.json`."""
    path = Path(run_dir) / "state.json"
    state = read_json(path, default={})
    if mib > state.get("train_peak_rss_mib", 0.0):
        state["train_peak_rss_mib"] = mib
        write_json(path, state)
    return state.get("train_peak_rss_mib")


def prepare(size, run_dir, data_dir, peer, **overrides):
    """Writes the config and builds the shared vocabulary once."""
    config = write_config(size, run_dir, data_dir, **overrides)
    if not (Path(run_dir) / "vocab.txt").exists():
        command = [peer.command("onmt_build_vocab"), "-config", config]
        subprocess.run([*command, "-n_sample", "-1"], check=True, env=peer.env())
    return config


def read_training_log(run_dir):
    """The `TrainingLog` of `run_dir/train.log` (empty before it exists)."""
    path = Path(run_dir) / "train.log"
    return parse_training_log(path.read_text() if path.exists() else "")


def train(run_dir, peer):
    """`onmt_train` until `training_finished`, resuming from checkpoints.

    OpenNMT-py's early stopping starts its patience anew in a resumed run;
    the log of all the runs decides here when the training has finished.
    """
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.yml").read_text())
    while not training_finished(read_training_log(run_dir), config):
        command = [peer.command("onmt_train"), "-config", run_dir / "config.yml"]
        resume = latest_checkpoint(run_dir)
        if resume is not None:
            command += ["-train_from", loadable(peer, resume)]
        print(f"[peer_opennmt] {' '.join(map(str, command))}", flush=True)
        status, _, _ = run_measured(
            command,
            run_dir / "train.log",
            peer.env(),
            should_stop=lambda: training_finished(read_training_log(run_dir), config),
            on_peak=lambda mib: record_peak(run_dir, mib),
        )
        if status not in (0, -15):  # -15: ended by `should_stop`
            raise SystemExit(f"onmt_train exited with {status}; see {run_dir}")
        if status == 0 and resume == latest_checkpoint(run_dir):
            break  # it ended without a new checkpoint: the step limit
    return read_training_log(run_dir)


def training_speed(size, run_dir, data_dir, peer, batch_size, steps):
    """Examples/s of `steps` steps at `batch_size`, all else the recipe's: a
    fresh run in `run_dir`, timed by its log's report windows (the first, the
    warm-up, left out), and its peak RSS. One validation at the end leaves a
    checkpoint that `opennmt_timing` decodes with when `size` has no
    training of its own."""
    run_dir = Path(run_dir)
    if not (run_dir / f"model_step_{steps}.pt").exists():
        every = max(1, steps // 6)
        config = prepare(
            size,
            run_dir,
            data_dir,
            peer,
            **{"batch_size": batch_size, "train_steps": steps, "report_every": every},
            **{"valid_steps": steps, "save_checkpoint_steps": steps},
        )
        command = [peer.command("onmt_train"), "-config", config]
        status, _, _ = run_measured(
            command,
            run_dir / "train.log",
            peer.env(),
            on_peak=lambda mib: record_peak(run_dir, mib),
        )
        if status != 0:
            raise SystemExit(f"onmt_train exited with {status}; see {run_dir}")
    log = read_training_log(run_dir)
    return {
        "batch_size": batch_size,
        "steps": steps,
        "timed_examples": log.examples,
        "examples_per_s": round(log.examples / log.seconds, 2),
        "train_peak_rss_mib": record_peak(run_dir),
    }


def best_checkpoints(run_dir, n):
    """The `n` kept checkpoints of the lowest validation perplexity."""
    log = read_training_log(run_dir)
    kept = checkpoint_steps(run_dir)
    ranked = sorted((v for v in log.validations if v[0] in kept), key=lambda v: v[1])
    return [kept[v[0]] for v in ranked[:n]]


def translate(peer, models, source, output, options, batch_size, log_path):
    """`onmt_translate` of `source` into `output`; returns ms per headline."""
    models = [loadable(peer, m) for m in models]
    command = [peer.command("python"), "-c", TRANSLATE, "-model", *models]
    command += ["-src", source, "-output", output, "-batch_size", batch_size]
    for key, value in options.items():
        command += [f"-{key}", value]
    command = [*map(str, command), "-report_time"]
    mark = Path(log_path).stat().st_size if Path(log_path).exists() else 0
    status, wall, rss = run_measured(command, log_path, peer.env())
    if status != 0:
        raise SystemExit(f"onmt_translate exited with {status}; see {log_path}")
    with open(log_path) as log:
        log.seek(mark)
        found = re.findall(r"Average translation time \(ms\): ([\d.]+)", log.read())
    return {"ms_per_headline": float(found[-1]), "wall_s": wall, "peak_rss_mib": rss}


def decodings(export_dir=None):
    """The recipe's decoding and the export's, `{name: options}`."""
    return {"recipe": RECIPE_DECODING, "export": export_decoding(export_dir)}


def options_tag(options):
    """A file-name part that tells one set of `onmt_translate` options."""
    return "-".join(f"{key}{value}" for key, value in options.items())


def translate_test(run_dir, peer, data_dir, export_dir=None, names=DECODINGS):
    """Translates the test set by the best checkpoint, with the decodings
    `names` (of `DECODINGS`).

    The best checkpoint alone, as OpenNMT-py's page reports it: its checkpoint
    ensembles (`-model a.pt b.pt`) of a copy-attention model fail in 3.5.1
    (`EnsembleDecoderOutput` has no `view`).
    """
    source = Path(data_dir) / "org_data" / "test.src.txt"
    model = best_checkpoints(run_dir, 1)
    log, outputs = Path(run_dir) / "translate.log", {}
    for name, options in decodings(export_dir).items():
        if name not in names:
            continue
        # Named by checkpoint too: a longer training's best is decoded anew.
        tag = f"{Path(model[0]).stem}.{options_tag(options)}"
        output = Path(run_dir) / f"test.{tag}.txt"
        if not output.exists():
            partial = output.with_suffix(".partial")
            translate(peer, model, source, partial, options, 64, log)
            partial.rename(output)
        outputs[name] = {"path": str(output), "options": options}
        outputs[name]["checkpoint"] = Path(model[0]).name
    return outputs


def score_headlines(predictions, references, n_bootstrap=1000, seed=0):
    """ROUGE F1 with intervals, by the project's own scoring."""
    from models.scoring.metrics import rouge_with_intervals

    predictions = [p.strip() for p in predictions]
    references = [r.strip() for r in references]
    return rouge_with_intervals(
        predictions, references, n_bootstrap=n_bootstrap, seed=seed
    )


def read_lines(path):
    return Path(path).read_text().splitlines()


def gigaword_test(data_dir):
    """`(documents, references)` of the test set."""
    org = Path(data_dir) / "org_data"
    return read_lines(org / "test.src.txt"), read_lines(org / "test.tgt.txt")


def score_outputs(data_dir, outputs):
    """Adds the ROUGE of each translated test set to its entry."""
    references = gigaword_test(data_dir)[1]
    for output in outputs.values():
        output["rouge"] = score_headlines(read_lines(output["path"]), references)
    return outputs


def opennmt_timing(run_dir, peer, data_dir, latency_documents, export_dir=None):
    """Headlines/s at batch 64 (the test set) and ms at batch 1 (its first
    `latency_documents`), the best checkpoint with the export's search."""
    run_dir = Path(run_dir)
    source = Path(data_dir) / "org_data" / "test.src.txt"
    model = best_checkpoints(run_dir, 1)
    first = run_dir / "latency.src.txt"
    first.write_text("\n".join(read_lines(source)[:latency_documents]) + "\n")
    log, scratch = run_dir / "timing.log", run_dir / "timing.out.txt"
    options = export_decoding(export_dir)
    batch = translate(peer, model, source, scratch, options, 64, log)
    headlines = read_lines(scratch)
    one = translate(peer, model, first, scratch, options, 1, log)
    return {
        "headlines_per_s_batch_64": 1000 / batch["ms_per_headline"],
        "latency_ms_batch_1": one["ms_per_headline"],
        "decoding_peak_rss_mib": batch["peak_rss_mib"],
        "checkpoint": str(Path(model[0]).relative_to(run_dir.parent)),
        "mean_headline_words": sum(len(h.split()) for h in headlines) / len(headlines),
    }


def training_summary(run_dir):
    """Examples/s, time to the best validation and peak RSS of a training."""
    log = read_training_log(run_dir)
    config = json.loads((Path(run_dir) / "config.yml").read_text())
    best = log.best() or (None,) * 4
    return {
        "validations": len(log.validations),
        "best_step": best[0],
        "best_valid_ppl": best[1],
        "best_valid_accuracy": best[2],
        "wall_s_to_best": best[3] and round(best[3], 1),
        "examples_per_s": log.seconds and round(log.examples / log.seconds, 2),
        "train_peak_rss_mib": record_peak(run_dir),
        "finished": training_finished(log, config),
    }


def run_size(size, args, stages):
    """Runs `stages` for one size; returns its part of the result."""
    run_dir, peer = Path(args.work_dir) / size, Peer(args.venv, args.threads)
    part = {"threads": args.threads}
    if "config" in stages:
        prepare(size, run_dir, args.data_dir, peer)
        part["config"] = dict(
            zip(("word_vec_size", "hidden_size"), size_dims(size), strict=True)
        )
    if "train" in stages:
        train(run_dir, peer)
    if (run_dir / "train.log").exists():
        part["training"] = training_summary(run_dir)
    export = args.keras_export
    if "translate" in stages or "score" in stages:
        outputs = translate_test(run_dir, peer, args.data_dir, export, args.decodings)
        if "score" in stages:
            part["test"] = score_outputs(args.data_dir, outputs)
    decoded = run_dir
    if "timing" in stages and args.train_batch_size:
        batch, steps = args.train_batch_size, args.train_steps
        speed_dir = Path(args.work_dir) / f"{size}-batch{batch}"
        part[f"training_batch_{batch}"] = training_speed(
            size, speed_dir, args.data_dir, peer, batch, steps
        )
        if not (run_dir.exists() and checkpoint_steps(run_dir)):
            decoded = speed_dir
    if "timing" in stages:
        latency = args.latency_documents
        part["timing"] = opennmt_timing(decoded, peer, args.data_dir, latency, export)
    return part


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--size", choices=(*SIZES, "both"), default="member")
    add("--stages", default=",".join(STAGES), help="comma-separated STAGES")
    add("--only-timing", action="store_true", help="the timing stage alone")
    add("--venv", type=Path, default=DEFAULT_VENV)
    add("--threads", type=int, default=1, help="OpenNMT-py's torch threads")
    add("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="runs, outside git")
    add("--data-dir", type=Path, default=Path("../shared/data/gigaword_sample"))
    add("--keras-export", type=Path, help="the export whose search to decode with")
    add("--decodings", default=",".join(DECODINGS), help="comma-separated DECODINGS")
    add("--latency-documents", type=int, default=100)
    add(
        "--train-batch-size",
        type=int,
        help="timing: the training speed too, at this batch (a fresh run)",
    )
    add("--train-steps", type=int, default=150, help="of --train-batch-size")
    add("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    stages = ("timing",) if args.only_timing else tuple(args.stages.split(","))
    args.decodings = tuple(args.decodings.split(","))
    for flag, given, known in (
        ("--stages", stages, STAGES),
        ("--decodings", args.decodings, DECODINGS),
    ):
        unknown = ",".join(sorted(set(given) - set(known)))
        if unknown:
            parser.error(f"`{flag}` must be of {','.join(known)}. Received: {unknown}")
    return args, stages


def main(argv=None):
    from benchmarks.common import machine_info

    args, stages = parse_args(argv)
    key = {("timing",): "machine_timing", ("venv",): "machine_checks"}.get(
        stages, "machine"
    )
    result = {"opennmt_py": OPENNMT_VERSION, key: machine_info(), "opennmt": {}}
    if "venv" in stages:
        make_venv(args.venv)
        result["copy_attention_checks"] = patch_peer(args.venv)
    sizes = SIZES if args.size == "both" else (args.size,)
    for size in sizes:
        result["opennmt"][size] = run_size(size, args, stages)
    path = Path(args.output)
    write_json(path, merge(read_json(path, default={}), result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
