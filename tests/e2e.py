"""End-to-end helpers: `train.py` on tiny made-up Gigaword-style data.

Shared by the pipeline tests and the `trained` fixture (tests/conftest.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"w{i}" for i in range(40)] + ["corp.", "'s", ",", "."]
TINY_MODEL = [
    "--vocab-size",
    "60",
    "--embedding-dim",
    "16",
    "--hidden-size",
    "16",
    "--attention-units",
    "8",
    "--batch-size",
    "8",
    "--max-source-length",
    "16",
    "--max-target-length",
    "6",
    "--validation-rouge-examples",
    "4",
    "--beam-size",
    "2",
    "--max-length",
    "5",
    "--min-length",
    "1",
    # Decoding tuning traces a search per n-gram size: only where tested.
    "--no-tune-decoding",
    # One model: the ensemble (the default) only where tested.
    "--ensemble",
    "1",
    # A few steps: the weights' average must follow them closely (0.999 a
    # step would keep the initial weights); 0.5 still runs its code.
    "--ema-momentum",
    "0.5",
]


def write_org_data(root, sizes=(48, 8, 8), seed=0):
    """Random documents; the headline is three of their words."""
    rng = np.random.default_rng(seed)
    folder = root / "org_data"
    folder.mkdir(parents=True)
    for split, n in zip(("train", "dev", "test"), sizes, strict=True):
        docs, heads = [], []
        for _ in range(n):
            doc = list(rng.choice(WORDS, size=rng.integers(6, 14)))
            docs.append(" ".join(doc))
            heads.append(" ".join(doc[:3]))
        (folder / f"{split}.src.txt").write_text("\n".join(docs) + "\n")
        (folder / f"{split}.tgt.txt").write_text("\n".join(heads) + "\n")
    return root


def train_command(tmp_path, *extra):
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "--data-dir",
        str(tmp_path / "data"),
        "--tfds-dir",
        str(tmp_path / "tfds"),
        "--run-dir",
        str(tmp_path / "run"),
        "--export-dir",
        str(tmp_path / "export"),
        *TINY_MODEL,
        *extra,
    ]


def run(command, cwd=ROOT):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def train_tiny_run(tmp_path):
    """One tiny training run on two replicas, tuned, exported and evaluated.

    Returns the finished `subprocess.CompletedProcess`; the run is in
    `tmp_path / "run"`, its export in `tmp_path / "export" / "1"`.
    """
    write_org_data(tmp_path / "data")
    result = run(
        train_command(
            tmp_path,
            "--strategy",
            "mirrored",
            "--cpu-devices",
            "2",
            # Enough steps for the tiny model to learn to end its headlines
            # (on 3 words, as the data's), so a minimum length can bind: two
            # validations of 12 batches (two passes of 6).
            "--validate-every",
            "96",
            "--train-examples",
            "192",
            "--max-eval-examples",
            "8",
            "--sampled-softmax",
            "16",
            "--tune-decoding",
            "--tune-examples",
            "8",
            "--tune-length-penalties",
            "0.5",
            "3.0",
            "--tune-ngram-sizes",
            "0",
            "2",
            "--tune-end-penalties",
            "0",
            "2",
            # The data has digits (`w12`), which would choose `general`.
            "--normalization",
            "gigaword",
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result
