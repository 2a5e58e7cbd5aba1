"""The machine a benchmark ran on, for its result file: one record shared by every benchmark script.

CPU model (``/proc/cpuinfo``), cores, memory, load average, ``OMP_NUM_THREADS``, Python and the versions of
the packages a benchmark names (read from their metadata, without importing them). Speed figures are only
comparable between runs on the same CPU (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["load_average", "machine"]


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            return round(int(line.split()[1]) / 2**20, 1)
    return float("nan")


def machine(packages: Sequence[str] = ()) -> dict[str, object]:
    """The machine and its load now; ``packages``: distributions whose versions to record."""
    return {
        "cpu_model": _cpu_model(),
        "nproc": os.cpu_count() or 0,
        "memory_gib": _memory_gib(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "python": platform.python_version(),
        **{name: metadata.version(name) for name in packages},
    }


def load_average() -> str:
    """``uptime``'s line: the load average over 1, 5 and 15 minutes, with the time."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
