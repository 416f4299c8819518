"""The machine a result was measured on, as one record for every result
file: `train.py`'s `training.json`, the papers' results and the benchmarks'.

`machine` gives the CPU model (`lscpu`'s "Model name", else
`/proc/cpuinfo`'s), the cores, the CPU flags that decide matmul speed
(`MATMUL_FLAGS`, the full list is long), the memory and the versions of the
libraries the caller names that are loaded. A figure holds only on the
machine that measured it, so each result names its own.

Plain Python only: nothing is imported to describe the machine.
"""

import os
import platform
import subprocess
import sys

# Where Linux describes the processors, where `lscpu` is missing.
CPUINFO = "/proc/cpuinfo"
# The CPU flags that decide matmul speed, in `lscpu`'s names.
MATMUL_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def machine(libraries=()):
    """The machine this process runs on.

    Args:
        libraries: Module names whose versions the record holds, those of
            them loaded (a version is `"?"` where the module has none).

    Returns:
        A dict: `cpu` (the model), `cores` (`os.cpu_count()`), `cpu_flags`
        (those of `MATMUL_FLAGS` the CPU has), `memory_gib` (None where
        unknown) and, for each library loaded, its version under its name.

    Example:

    >>> record = machine(libraries=("json",))
    >>> sorted(record)[:4]
    ['cores', 'cpu', 'cpu_flags', 'json']
    >>> set(record["cpu_flags"]) <= set(MATMUL_FLAGS)
    True
    """
    fields = cpu_fields()
    flags = set(fields.get("flags", "").split())
    record = {
        "cpu": fields.get("model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cpu_flags": [f for f in MATMUL_FLAGS if f in flags],
        "memory_gib": memory_gib(),
    }
    for name in libraries:
        if name in sys.modules:
            record[name] = getattr(sys.modules[name], "__version__", "?")
    return record


def cpu_fields():
    """`lscpu`'s fields, lowercased (`model name`, `flags`, ...); the first
    processor's `/proc/cpuinfo` fields where `lscpu` is missing; none off
    Linux."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        text = ""
    if not text:
        try:
            with open(CPUINFO) as file:
                text = file.read().split("\n\n")[0]
        except OSError:
            return {}
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def memory_gib():
    """The machine's memory in GiB, to a tenth (`/proc/meminfo`); None
    where unknown."""
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
