"""PyTorch's tutorial model, written for speed, against keras-attn on three backends.

Beside the tutorial's model as PyTorch's tutorial writes it
(`peer_pytorch_tutorial`), the same model as a PyTorch user who wants speed
writes it (`pytorch_fast.FastSeq2Seq`: the `nn.GRU` encoder, a fused decoder
step, one fused Adam), eager and under `torch.compile`, against keras-attn's
(`tutorial_task.keras_attn_model`, `train_on_batch`, `greedy_search`) on
torch, TensorFlow and JAX. The task: the tutorial's size, a batch of 32
pairs of 10 tokens, vocabulary 30, GRUs of 128.

Timed per program: one training step (forward, backward, Adam) and one
decoded batch (encoder and greedy search, all 10 steps: no row ends
early). keras-attn's decoding compiled as its `generate` compiles it:
`torch.compile` on torch, `tf.function` on TensorFlow, `jax.jit` on JAX; its
training step: what `model.compile` chooses on each backend (XLA on
TensorFlow and JAX, eager on torch), and on torch also under
`jit_compile=True` (`torch.compile` of Keras' training step, the side
"keras-attn torch, jit_compile=True", which only trains).

A backend is fixed at import, and JAX has its own environment (no
TensorFlow), so each backend runs in a worker process (`--worker`), which
builds and warms its programs (traces, compiles) and then times them when
asked. The driver asks in interleaved rounds (A, B, C, ..., each round in
another order, `benchmarks.common.interleaved`): one program runs at a time,
and the load of the machine hits every program's round alike. Every process
runs one thread. Reported: ms per call (median over rounds) and the median
per-round ratio to the fast PyTorch model, eager.

    python -m benchmarks.peer_pytorch_fast --jax-python /work/jaxvenv/bin/python
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import interleaved, median, median_ratio, print_machine_info

WORKERS = ("pytorch", "torch", "tensorflow", "jax")
# The PyTorch worker's programs; each keras-attn worker's are
# "keras-attn <backend>".
PYTORCH_SIDES = ("tutorial", "fast", "fast compiled")
KINDS = ("train", "decode")
REFERENCE = "fast"
TORCH_JIT_SIDE = "keras-attn torch, jit_compile=True"
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}


def side_names(worker):
    """The program sides a worker runs: `PYTORCH_SIDES` or `keras-attn X`."""
    if worker == "pytorch":
        return PYTORCH_SIDES
    if worker == "torch":
        return ("keras-attn torch", TORCH_JIT_SIDE)
    if worker in WORKERS:
        return (f"keras-attn {worker}",)
    raise ValueError(
        f"`worker` must be one of {', '.join(WORKERS)}. Received: {worker=}"
    )


# ------------------------------------------------------------------ workers


def pytorch_programs(vocab, seed=0):
    """`{name: callable}` of the tutorial's and the fast model's programs,
    all from the same initial weights."""
    import torch

    from benchmarks import peer_pytorch_tutorial as tutorial
    from benchmarks.pytorch_fast import FastSeq2Seq, fast_programs, tutorial_greedy
    from benchmarks.tutorial_task import BATCH, decoder_inputs, reversal_pairs

    torch.set_num_threads(1)
    source, target = (torch.from_numpy(a) for a in reversal_pairs(BATCH, vocab))
    inputs = torch.from_numpy(decoder_inputs(target.numpy()))
    torch.manual_seed(seed)
    encoder = tutorial.EncoderRNN(vocab, tutorial.HIDDEN)
    decoder = tutorial.AttnDecoderRNN(tutorial.HIDDEN, vocab)
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in (encoder, decoder)]
    programs = {
        "tutorial train": lambda: tutorial.tutorial_train_step(
            encoder, decoder, optimizers, source, target
        ),
        "tutorial decode": lambda: tutorial_greedy(encoder, decoder, source),
    }
    for side, compiled in (("fast", False), ("fast compiled", True)):
        model = FastSeq2Seq.from_tutorial(encoder, decoder)
        train, decode = fast_programs(model, source, inputs, target, compiled)
        programs[f"{side} train"], programs[f"{side} decode"] = train, decode
    return programs


def keras_programs(vocab, seed=0):
    """`{name: callable}` of keras-attn's training step and decoding on this
    process's backend (on torch also its training step under
    `jit_compile=True`), each blocking until its result is on the host."""
    import keras
    from keras import ops

    from benchmarks.tutorial_task import (
        BATCH,
        decoder_inputs,
        greedy_decoder,
        keras_attn_model,
        reversal_pairs,
    )

    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
    source, target = reversal_pairs(BATCH, vocab)
    source, target = source.astype("int32"), target.astype("int32")
    inputs = [source, decoder_inputs(target).astype("int32")]

    def compiled_model(jit_compile="auto"):
        keras.utils.set_random_seed(seed)
        model = keras_attn_model(vocab)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit_compile,
        )
        return model

    model = compiled_model()
    decode = greedy_decoder(model)
    programs = {}
    if backend == "torch":
        decode = torch.compile(decode)
        jit_model = compiled_model(jit_compile=True)
        programs[f"{TORCH_JIT_SIDE} train"] = lambda: jit_model.train_on_batch(
            inputs, target
        )
    elif backend == "jax":
        import jax

        decode = jax.jit(decode)
    elif backend == "tensorflow":
        import tensorflow as tf

        decode = tf.function(decode)
    memory_source = ops.convert_to_tensor(source)
    name = f"keras-attn {backend}"
    return {
        f"{name} train": lambda: model.train_on_batch(inputs, target),
        f"{name} decode": lambda: ops.convert_to_numpy(decode(memory_source)),
        **programs,
    }


def serve(programs, replies, requests=sys.stdin, warmup=2):
    """Warms `programs` (their first calls timed), says so on `replies`, then
    answers each request line `name number` with the seconds per call."""
    from benchmarks.common import timeit

    first = {}
    for name, fn in programs.items():
        start = time.perf_counter()
        fn()
        first[name] = round(time.perf_counter() - start, 3)
        for _ in range(warmup - 1):
            fn()
    print(json.dumps({"ready": list(programs), "first_s": first}), file=replies)
    replies.flush()
    for line in requests:
        name, number = line.rsplit(maxsplit=1)
        print(timeit(programs[name], int(number)), file=replies, flush=True)


def worker_main(worker, vocab):
    # The replies get the process's stdout; whatever else prints goes to
    # stderr, so that no library's message is read as a reply.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if worker == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    programs = pytorch_programs(vocab) if worker == "pytorch" else keras_programs(vocab)
    serve(programs, replies)


# ------------------------------------------------------------------ driver


class Worker:
    """A worker process, its programs timed on request."""

    def __init__(self, worker, python, vocab, log):
        env = {**os.environ, **ONE_THREAD}
        if worker != "pytorch":
            env["KERAS_BACKEND"] = worker
        command = [python, "-m", "benchmarks.peer_pytorch_fast", "--worker", worker]
        self.process = subprocess.Popen(
            [*command, "--vocab", str(vocab)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )

    def ready(self):
        """`{"ready": names, "first_s": {name: s}}` once the worker is warm."""
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"A worker ended: {self.process.args}")
        return json.loads(line)

    def time(self, name, number):
        self.process.stdin.write(f"{name} {number}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def summarize(times, sides, kinds=KINDS, reference=REFERENCE):
    """`{kind: {side: {"ms": median, "ratio": median ratio to reference}}}`,
    for the sides that run that kind."""
    return {
        kind: {
            side: {
                "ms": round(1e3 * median(times[f"{side} {kind}"]), 2),
                "ratio": round(
                    median_ratio(times, f"{side} {kind}", f"{reference} {kind}"), 3
                ),
            }
            for side in sides
            if f"{side} {kind}" in times
        }
        for kind in kinds
    }


def markdown(summary):
    """One row a side: train ms, its ratio, decode ms, its ratio."""
    lines = [
        "| program | train ms/step | vs fast PyTorch "
        "| decode ms/batch | vs fast PyTorch |",
        "|---|---|---|---|---|",
    ]
    for side, train in summary["train"].items():
        decode = summary["decode"].get(side, {"ms": "-", "ratio": "-"})
        lines.append(
            f"| {side} | {train['ms']} | {train['ratio']} | {decode['ms']} "
            f"| {decode['ratio']} |"
        )
    return "\n".join(lines)


def driver_main(args):
    print_machine_info()
    pythons = {w: sys.executable for w in WORKERS} | {"jax": args.jax_python}
    log = open(args.log, "w") if args.log else subprocess.DEVNULL
    workers = {w: Worker(w, pythons[w], args.vocab, log) for w in args.workers}
    try:
        first_s, programs = {}, {}
        for worker in workers.values():
            ready = worker.ready()
            first_s.update(ready["first_s"])
            for name in ready["ready"]:
                programs[name] = (worker, name)
        times = interleaved(
            programs,
            repeats=args.repeats,
            number=args.number,
            warmup=0,
            timer=lambda program, number: program[0].time(program[1], number),
        )
    finally:
        for worker in workers.values():
            worker.close()
    sides = [s for w in args.workers for s in side_names(w)]
    summary = summarize(times, sides)
    result = {"vocab": args.vocab, "repeats": args.repeats, "number": args.number}
    print(json.dumps({**result, "first_call_s": first_s, **summary}))
    print(markdown(summary))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=WORKERS, help="run as a worker (internal)")
    p.add_argument("--workers", nargs="+", choices=WORKERS, default=list(WORKERS))
    p.add_argument("--jax-python", default=sys.executable, help="JAX's Python")
    p.add_argument("--vocab", type=int, default=30)
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--log", help="the workers' stderr, appended here")
    args = p.parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.vocab)
    else:
        if REFERENCE not in [s for w in args.workers for s in side_names(w)]:
            p.error("`--workers` must include pytorch (the reference).")
        driver_main(args)


if __name__ == "__main__":
    main()
