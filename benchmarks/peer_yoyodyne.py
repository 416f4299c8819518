"""yoyodyne's pointer-generator LSTM on the Gigaword sample, word-level: speed.

yoyodyne (CUNY-CL; PyTorch Lightning) is a character-level transduction
toolkit; `source_sep` / `target_sep` = " " make it word-level. Its
pointer-generator LSTM at keras-attn's member's size (`model_config`), on the
shared sample, with keras-attn's vocabulary: yoyodyne keeps every training
word (it has no size or count limit), so the `data` stage writes each word
outside keras-attn's vocabulary (the sample's 10,000 most frequent, seen
twice at least) as `<unk>`. Each stage resumes: `venv` (yoyodyne with a CPU
torch, outside the project), `data` (its TSV files), `train` (`--train-steps`
steps of batch 64, each step's end timed by a Lightning callback, a
validation loss at the end), `timing` (the test set decoded at batch 64 and
the first `--latency-documents` at batch 1, greedy and with its beam) and
`score` (the validation set's greedy headlines' ROUGE). Results go to
`--output` (JSON); the commands are in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.common import machine_info, merge, run_measured
from benchmarks.peer_opennmt import read_lines, score_headlines
from models.settings.fit import TrainOptions
from models.settings.json_files import read_json, write_json
from models.settings.model import SummarizerConfig

YOYODYNE_VERSION = "0.5.27"
TORCH_VERSION = "2.13.0"
# yoyodyne's requirements at the versions this comparison ran with, less
# torchvision and torchaudio: yoyodyne imports neither, and their releases
# here pin a CUDA torch that would replace the CPU one.
PEER_PACKAGES = (
    "lightning==2.6.6 jsonargparse[signatures]==4.53.0 docstring-parser==0.18.0 "
    "typeshed-client==2.15.0 maxwell==0.2.6 omegaconf==2.4.0 PyYAML==6.0.4 "
    "rich==15.0.0 torchmetrics==1.9.0 wandb==0.31.0 numpy==2.4.6"
).split()
DEFAULT_VENV = Path("~/.cache/keras-attn-peers/yoyodyne-venv").expanduser()
DEFAULT_WORK_DIR = Path("~/.cache/keras-attn-peers/yoyodyne-runs").expanduser()
DEFAULT_OUTPUT = Path("benchmarks/results/peer_yoyodyne.json")
STAGES = ("venv", "data", "train", "timing", "score")
SPLITS = ("train", "dev", "test")
UNK = "<unk>"
# yoyodyne raises on a longer source; the sample's longest is 78 words.
MAX_SOURCE_LENGTH, MAX_TARGET_LENGTH = 128, 40
SEARCHES = {"greedy": 1, "beam": 5}  # beam width, keras-attn's export's

# Run by the venv's python: yoyodyne's own command line with a callback
# that writes, as JSON, the time at each training step's end (with its batch
# size) and the wall time of each predicted batch.
DRIVER = """import json, os, sys, time
from lightning.pytorch.callbacks import Callback
from yoyodyne.cli.main import main

class Clock(Callback):
    def __init__(self, path: str):
        self.path, self.steps, self.batches = path, [], []

    def dump(self):
        with open(self.path, "w") as sink:
            json.dump({"steps": self.steps, "batches": self.batches}, sink)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.steps.append([time.perf_counter(), len(batch)])
        if len(self.steps) % 10 == 0:
            self.dump()

    def on_predict_batch_start(self, trainer, module, batch, batch_idx, *rest):
        self.start = time.perf_counter()

    def on_predict_batch_end(self, trainer, module, outputs, batch, *rest):
        self.batches.append([time.perf_counter() - self.start, len(batch)])

    def on_predict_epoch_end(self, trainer, module):
        self.dump()

    def on_train_end(self, trainer, module):
        self.dump()

class LastCheckpoint(Callback):
    \"\"\"Saves the last step's checkpoint as `stepN.ckpt` in `path`.\"\"\"

    def __init__(self, path: str):
        self.path = path

    def on_train_end(self, trainer, module):
        path = os.path.join(self.path, f"step{trainer.global_step}.ckpt")
        if not os.path.exists(path):
            trainer.save_checkpoint(path)

sys.argv[0] = "yoyodyne"
main()
"""


def model_config(work_dir, train_steps):
    """yoyodyne's `fit` configuration (JSON is YAML), the member's size:
    embedding 128 shared, encoder 256 (both directions), decoder 256,
    dropout 0.3 on embeddings and decoder outputs, label smoothing 0.1,
    Adam at 0.002, gradients clipped at norm 2, batch 64 (`TrainOptions`)."""
    member, fit = SummarizerConfig(), TrainOptions()
    work_dir = Path(work_dir)
    encoder = {
        "bidirectional": True,
        "layers": member.encoder_layers,
        "embedding_size": member.embedding_dim,
        "hidden_size": member.hidden_size // 2,  # a direction's
        "dropout": member.dropout,
    }
    return {
        "seed_everything": 3435,
        "trainer": {
            "accelerator": "cpu",
            "devices": 1,
            "max_steps": train_steps,
            # One validation, at the end, even past the first epoch.
            "val_check_interval": train_steps,
            "check_val_every_n_epoch": None,
            "num_sanity_val_steps": 0,
            "log_every_n_steps": 25,
            "gradient_clip_val": fit.clipnorm,
            "enable_progress_bar": False,
            "callbacks": [{"class_path": "__main__.Clock", "init_args": {"path": ""}}],
            "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger"},
        },
        "model": {
            "class_path": "yoyodyne.models.PointerGeneratorLSTMModel",
            "init_args": {
                "source_encoder": {
                    "class_path": "yoyodyne.models.modules.LSTMEncoder",
                    "init_args": encoder,
                },
                "embedding_size": member.embedding_dim,
                "decoder_hidden_size": member.hidden_size,
                "decoder_layers": member.encoder_layers,
                "decoder_dropout": member.dropout,
                "label_smoothing": member.label_smoothing,
                "optimizer": {
                    "class_path": "torch.optim.Adam",
                    "init_args": {"lr": fit.learning_rate},
                },
            },
        },
        "data": {
            "model_dir": str(work_dir / "model"),
            "train": str(work_dir / "train.tsv"),
            "val": str(work_dir / "dev.tsv"),
            "source_sep": " ",
            "target_sep": " ",
            "batch_size": fit.batch_size,
            "max_source_length": MAX_SOURCE_LENGTH,
            "max_target_length": MAX_TARGET_LENGTH,
        },
        "checkpoint": {"monitor": "val_loss", "mode": "min"},
    }


def make_venv(venv):
    """Creates `venv` with yoyodyne and a CPU torch unless it has them."""
    venv = Path(venv)
    python = venv / "bin" / "python"
    if (venv / "bin" / "yoyodyne").exists():
        if venv_versions(venv)["torch_cuda"] != "None":
            raise SystemExit(f"{venv} holds a CUDA torch: remove it and run `venv`.")
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    # The CPU wheel first, so that no later install brings another torch.
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run([*pip, "--no-deps", f"yoyodyne=={YOYODYNE_VERSION}"], check=True)
    subprocess.run([*pip, *PEER_PACKAGES], check=True)


def venv_versions(venv):
    """torch's and yoyodyne's versions in `venv`, and whether torch is CUDA's."""
    code = (
        "import importlib.metadata as m, torch, yoyodyne; "
        "print(torch.__version__, m.version('yoyodyne'), torch.version.cuda)"
    )
    python = Path(venv) / "bin" / "python"
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    )
    torch, yoyodyne, cuda = done.stdout.split()
    return {"torch": torch, "yoyodyne": yoyodyne, "torch_cuda": cuda}


def write_data(data_dir, work_dir, vocabulary_size, min_count=None):
    """The sample's splits as yoyodyne's TSV files in keras-attn's tokens,
    each word outside the training split's `vocabulary_size` most frequent
    seen `min_count` times at least (keras-attn's vocabulary by default) as
    `UNK`; 0 keeps every word, as yoyodyne does. Returns the vocabulary's
    size (keras-attn's reserved entries included), or None for 0."""
    import tensorflow as tf

    from models import text
    from models.data.word_counts import split_vocabulary

    org, work_dir = Path(data_dir) / "org_data", Path(work_dir)
    pairs = {s: (org / f"{s}.src.txt", org / f"{s}.tgt.txt") for s in SPLITS}
    lines = {s: tuple(map(read_lines, paths)) for s, paths in pairs.items()}
    known = None
    if vocabulary_size:
        train = tf.data.Dataset.from_tensor_slices(lines["train"])
        if min_count is None:
            min_count = TrainOptions().min_count
        known = set(split_vocabulary(train, vocabulary_size, min_count=min_count))

    def words(texts):
        tokens = text.tokenize(tf.constant(texts)).to_list()
        return [
            " ".join(
                t.decode() if known is None or t.decode() in known else UNK
                for t in line
            )
            for line in tokens
        ]

    work_dir.mkdir(parents=True, exist_ok=True)
    for split, (documents, headlines) in lines.items():
        rows = zip(words(documents), words(headlines), strict=True)
        path = work_dir / f"{split}.tsv"
        path.with_suffix(".partial").write_text("".join(f"{d}\t{h}\n" for d, h in rows))
        path.with_suffix(".partial").rename(path)
    return known and len(known)


def run_driver(venv, work_dir, subcommand, args, threads, log_name):
    """yoyodyne's `subcommand` (`DRIVER`) on the config, with `args`; returns
    `(clock, peak RSS in MiB)`."""
    work_dir = Path(work_dir)
    clock = work_dir / f"{log_name}.clock.json"
    command = [Path(venv) / "bin" / "python", "-c", DRIVER, subcommand]
    # The config first: options after it override its values.
    command += ["--config", work_dir / "config.yaml", *args]
    command += ["--trainer.callbacks.init_args.path", clock]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "WANDB_MODE": "disabled"}
    status, _, peak = run_measured(
        list(map(str, command)), work_dir / f"{log_name}.log", env
    )
    if status != 0:
        raise SystemExit(f"yoyodyne exited with {status}; see {work_dir}")
    return read_json(clock), peak


def train(args, work_dir):
    """Trains for `--train-steps`; returns examples/s after `--warmup-steps`,
    the training's peak RSS and the validation loss at the end."""
    config = model_config(work_dir, args.train_steps)
    (work_dir / "config.yaml").write_text(json.dumps(config, indent=2))
    clock, peak = run_driver(args.venv, work_dir, "fit", [], args.threads, "train")
    steps = clock["steps"][args.warmup_steps :]
    examples = sum(size for _, size in steps[1:])
    metrics = sorted(
        Path(work_dir, "model").glob("lightning_logs/version_*/metrics.csv")
    )
    val_loss = [
        float(row["val_loss"])
        for row in csv.DictReader(metrics[-1].open())
        if row.get("val_loss")
    ]
    return {
        "steps": len(clock["steps"]),
        "timed_steps": len(steps) - 1,
        "examples_per_s": round(examples / (steps[-1][0] - steps[0][0]), 2),
        "peak_rss_mib": round(peak, 1),
        "val_loss": val_loss[-1] if val_loss else None,
        "threads": args.threads,
    }


def best_checkpoint(work_dir):
    found = sorted(Path(work_dir, "model").glob("**/checkpoints/*.ckpt"))
    if not found:
        raise SystemExit(f"No checkpoint under {work_dir}/model: run --stages train")
    return max(found, key=lambda p: p.stat().st_mtime)


def decode(
    venv, work_dir, source, batch_size, beam_width, threads, tag, checkpoint=None
):
    """Decodes `source` (a TSV) at `batch_size` by `checkpoint` (the latest
    by default); returns seconds per batch (the model's prediction loop,
    data loading aside), the headlines and the peak RSS."""
    output = Path(work_dir) / f"{tag}.txt"
    args = ["--ckpt_path", checkpoint or best_checkpoint(work_dir)]
    args += ["--data.predict", source, "--data.batch_size", batch_size]
    args += ["--model.init_args.beam_width", beam_width, "--prediction.path", output]
    clock, peak = run_driver(venv, work_dir, "predict", map(str, args), threads, tag)
    # A beam writes each hypothesis with its score: the best is the first.
    headlines = [line.split("\t")[0] for line in read_lines(output)]
    return clock["batches"], headlines, peak


def first_lines(path, n):
    """A copy of `path`'s first `n` lines beside it, its path."""
    copy = path.with_name(f"{path.stem}.first{n}.tsv")
    copy.write_text("\n".join(read_lines(path)[:n]) + "\n")
    return copy


def timing(args, work_dir):
    """Headlines/s at batch 64 on the test set (the beam: its first
    `--beam-documents`) and ms at batch 1 on its first
    `--latency-documents`, greedy and with the beam."""
    venv, threads, test = args.venv, args.threads, work_dir / "test.tsv"
    first = first_lines(test, args.latency_documents)
    result = {}
    for name, width in SEARCHES.items():
        batch = test if width == 1 else first_lines(test, args.beam_documents)
        batches, headlines, peak = decode(
            venv, work_dir, batch, 64, width, threads, f"test.{name}"
        )
        ones, _, _ = decode(venv, work_dir, first, 1, width, threads, f"latency.{name}")
        result[name] = {
            "beam_width": width,
            "documents_batch_64": len(headlines),
            "headlines_per_s_batch_64": round(
                sum(n for _, n in batches) / sum(s for s, _ in batches), 2
            ),
            "latency_ms_batch_1_mean": round(
                1000 * statistics.mean(s for s, _ in ones), 1
            ),
            "latency_ms_batch_1_p50": round(
                1000 * statistics.median(s for s, _ in ones), 1
            ),
            "mean_headline_words": round(
                statistics.mean(len(h.split()) for h in headlines), 2
            ),
            "decoding_peak_rss_mib": round(peak, 1),
        }
    return result


def score(args, work_dir):
    """ROUGE of the checkpoint's greedy headlines of the validation set
    against its references as written (`<unk>` scores as a word)."""
    documents = work_dir / "dev.tsv"
    _, headlines, _ = decode(args.venv, work_dir, documents, 64, 1, args.threads, "dev")
    references = read_lines(Path(args.data_dir) / "org_data" / "dev.tgt.txt")
    return {
        "checkpoint": best_checkpoint(work_dir).name,
        "dev_greedy": score_headlines(headlines, references),
    }


def once(path, measure):
    """`measure()` with the machine it ran on, kept at `path`: a stage that
    finished is not run again."""
    if not path.exists():
        write_json(path, {**measure(), "machine": machine_info()})
    return read_json(path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--stages", default=",".join(STAGES), help="comma-separated STAGES")
    add("--venv", type=Path, default=DEFAULT_VENV)
    add("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="runs, outside git")
    add("--data-dir", type=Path, default=Path("../shared/data/gigaword_sample"))
    add("--threads", type=int, default=1, help="yoyodyne's torch threads")
    add(
        "--vocabulary-size",
        type=int,
        default=SummarizerConfig().vocab_size,
        help="keras-attn's by default; 0: every training word, as yoyodyne keeps",
    )
    add("--train-steps", type=int, default=300)
    add("--warmup-steps", type=int, default=50, help="steps left out of the speed")
    add("--latency-documents", type=int, default=100)
    add("--beam-documents", type=int, default=320, help="its beam is slow")
    add("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    stages = tuple(args.stages.split(","))
    unknown = ",".join(sorted(set(stages) - set(STAGES)))
    if unknown:
        parser.error(f"`--stages` must be of {','.join(STAGES)}. Received: {unknown}")
    return args, stages


def main(argv=None):
    args, stages = parse_args(argv)
    work_dir = Path(args.work_dir)
    # A run is known by its folder's name: runs of other sizes or steps
    # share one `--output`.
    run = {}
    result = {"yoyodyne_version": YOYODYNE_VERSION, "runs": {work_dir.name: run}}
    if "venv" in stages:
        make_venv(args.venv)
        result["venv"] = venv_versions(args.venv)
    if "data" in stages:
        run["data"] = once(
            work_dir / "data.json",
            lambda: {
                "vocabulary_size": write_data(
                    args.data_dir, work_dir, args.vocabulary_size
                )
            },
        )
    if "train" in stages:
        run["training"] = once(
            work_dir / "training.json",
            lambda: train(args, work_dir),
        )
    if "timing" in stages:
        run["timing"] = once(
            work_dir / "timing.json",
            lambda: timing(args, work_dir),
        )
    if "score" in stages:
        run["score"] = once(work_dir / "score.json", lambda: score(args, work_dir))
    path = Path(args.output)
    write_json(path, merge(read_json(path, default={}), result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
