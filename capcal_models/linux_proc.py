"""What Linux's ``/proc`` says of this machine: a field of a ``/proc`` file, the memory available to a new
process, the CPU's vendor. The one reader of ``/proc/meminfo`` and ``/proc/cpuinfo`` for capcal's engines:
``capcal_models.batch_size`` (capcal-hf's default rows) and ``capcal_models.packed_linear`` (how many packed
weight copies fit, and whether packing pays on this CPU).

Units: ``/proc/meminfo`` gives kB of 1024 bytes (``proc(5)``: "kB" there is KiB), so
``available_memory_bytes = MemAvailable * 1024``. Elsewhere than Linux the files are missing and every
function returns None.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CPUINFO", "MEMINFO", "available_memory_bytes", "cpu_vendor", "proc_field"]

MEMINFO = Path("/proc/meminfo")  # "MemAvailable:  N kB", N in units of 1024 bytes
CPUINFO = Path("/proc/cpuinfo")
KIB = 1024


def proc_field(path: str | Path, name: str) -> str | None:
    """The value of the first line ``name: value`` of a ``/proc`` file (stripped), or None when the file or
    the line is missing."""
    try:
        for line in Path(path).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name:
                return value.strip()
    except OSError:
        return None
    return None


def available_memory_bytes() -> int | None:
    """Memory available to a new process without swapping, in bytes: ``MemAvailable`` (kB) x 1024; None
    without ``/proc/meminfo`` or that line (kernels before 3.14)."""
    value = proc_field(MEMINFO, "MemAvailable")
    return None if value is None else int(value.split()[0]) * KIB


def cpu_vendor() -> str | None:
    """The CPU's ``vendor_id`` ("GenuineIntel", "AuthenticAMD"), None where ``/proc/cpuinfo`` lacks it."""
    return proc_field(CPUINFO, "vendor_id")
