"""One machine record (`models.settings.machine`) for `train.py`'s
`training.json`, the papers' results and the benchmarks'."""

import subprocess
import sys

from benchmarks import common
from models.settings import machine as machine_module
from models.training import progress
from papers import records

LSCPU = """Architecture:        x86_64
CPU(s):              2
Model name:          AMD EPYC
Flags:               fpu sse2 avx avx2 fma avx512f avx512_bf16 amx_tile
"""


def fake_lscpu(monkeypatch, text=LSCPU):
    def run(command, **kwargs):
        assert command == ["lscpu"]
        return subprocess.CompletedProcess(command, 0, stdout=text, stderr="")

    monkeypatch.setattr(machine_module.subprocess, "run", run)


def test_the_record_names_the_cpu_its_matmul_flags_and_the_libraries(monkeypatch):
    fake_lscpu(monkeypatch)
    record = machine_module.machine(libraries=("pytest", "no_such_module"))
    assert record["cpu"] == "AMD EPYC"
    assert record["cpu_flags"] == [
        "avx",
        "avx2",
        "fma",
        "avx512f",
        "avx512_bf16",
        "amx_tile",
    ]
    assert record["pytest"] == sys.modules["pytest"].__version__
    assert "no_such_module" not in record
    assert record["cores"] >= 1


def test_without_lscpu_the_first_processor_of_cpuinfo_is_read(monkeypatch, tmp_path):
    fake_lscpu(monkeypatch, text="")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: sse2 avx2\n\n"
        "processor\t: 1\nmodel name\t: Other CPU\nflags\t\t: avx512f\n"
    )
    monkeypatch.setattr(machine_module, "CPUINFO", str(cpuinfo))
    record = machine_module.machine()
    assert (record["cpu"], record["cpu_flags"]) == ("Test CPU", ["avx2"])


def test_every_caller_records_the_same_machine(monkeypatch):
    fake_lscpu(monkeypatch)
    shared = {"cpu": "AMD EPYC", "cores": machine_module.machine()["cores"]}
    for record in (progress.machine(), records.machine(), common.machine_info()):
        assert {k: record[k] for k in shared} == shared
        assert record["cpu_flags"] == machine_module.machine()["cpu_flags"]
    assert records.machine()["accelerator"] == "none"
    assert {"python", "loadavg", "date"} <= set(common.machine_info())
