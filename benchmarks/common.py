"""Shared timing helpers for the benchmarks.

The benchmark machine is shared and noisy, so every reported figure is a
ratio of two programs measured in the same process, interleaved
(A, B, A, B, ...): each round times every program once, the ratio is taken
per round, and the median over rounds is reported. Slow drifts of the
machine's load hit both sides of a round alike and cancel in the ratio.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from models.settings.machine import machine


def timeit(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of `fn`, averaged over `number` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def interleaved(
    programs: dict[str, Callable[[], object]],
    *,
    repeats: int = 7,
    number: int = 10,
    warmup: int = 2,
    timer: Callable[[Callable[[], object], int], float] = timeit,
) -> dict[str, list[float]]:
    """Times each program `repeats` times, in rounds A, B, A, B, ...

    Args:
        programs: name to a zero-argument callable that blocks until its
            result is ready (call `.numpy()` or `block_until_ready`).
        repeats: rounds.
        number: calls per timing (the timing is their mean).
        warmup: untimed calls of each program first (tracing, compiling).
        timer: `timer(fn, number) -> seconds per call`; `timeit` by default.
            A program that runs in another process times itself there, so
            that the pipe's round trip is not counted.

    Returns:
        name to the list of `repeats` per-call times, in seconds.
    """
    for fn in programs.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in programs}
    names = list(programs)
    for r in range(repeats):
        # Each round starts one program later, and every other round runs
        # backwards: each program runs in every position and after each of
        # the others, so none is always the one after the heaviest: with a
        # fixed order, the same program measured slower in one position than
        # in another.
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        order = order if r % 2 == 0 else order[::-1]
        for name in order:
            times[name].append(timer(programs[name], number))
    return times


def median_ratio(times: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of `time[a] / time[b]` (same round, same load)."""
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


def median(values) -> float:
    return statistics.median(values)


def spread(times: list[float]) -> float:
    """Relative spread (max - min) / median of a list of timings."""
    m = statistics.median(times)
    return (max(times) - min(times)) / m if m else float("nan")


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (Linux: KiB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_info() -> dict:
    """What a result depends on: the machine (`models.settings.machine`:
    CPU model, cores, matmul flags, memory, the versions of TensorFlow,
    Keras, JAX and PyTorch loaded), Python, the platform, the load and the
    date."""
    return {
        **machine(libraries=("tensorflow", "keras", "jax", "torch")),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def print_machine_info() -> None:
    for key, value in machine_info().items():
        print(f"# {key}: {','.join(value) if isinstance(value, list) else value}")


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    def fmt(x):
        return f"{x:.3g}" if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def resident_peak_mib(pid):
    """The peak resident set size of a running process (`VmHWM`), MiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else 0.0


def run_measured(command, log_path, env, should_stop=None, on_peak=None):
    """Runs `command`, its output appended to `log_path`, watching it.

    Args:
        should_stop: called every second; when true, the process is ended.
        on_peak: called with the process's peak RSS (MiB) each time it grows,
            so that a killed run's peak is known too.

    Returns:
        `(exit status, wall seconds, peak RSS in MiB)` of that process.
    """
    peak = 0.0
    with open(log_path, "a") as log:
        start = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        while not (ended := os.wait4(process.pid, os.WNOHANG))[0]:
            if (now := resident_peak_mib(process.pid)) > peak:
                peak = now
                if on_peak is not None:
                    on_peak(peak)
            if should_stop is not None and should_stop():
                process.terminate()
            time.sleep(1)
    _, status, usage = ended
    wall = time.perf_counter() - start
    return os.waitstatus_to_exitcode(status), wall, max(peak, usage.ru_maxrss / 1024)


def merge(into, new):
    """Merges the nested dict `new` into `into`, in place."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into
