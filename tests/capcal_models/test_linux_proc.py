"""``capcal_models.linux_proc``: the one reader of ``/proc/meminfo`` and ``/proc/cpuinfo`` (capcal-hf's
default rows and its packed weights read the machine through it). Expected values are worked out here: kB
of ``/proc/meminfo`` are 1024 bytes, each figure chosen where x 1000 or x 1 gives another number; on this
machine the reading is checked against psutil's, an independent parser of the same file."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from capcal_models import linux_proc

MEMINFO = "MemTotal:        8000000 kB\nMemFree:          123456 kB\nMemAvailable:    3000000 kB\n"
CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC: 2 cores\n\n"
    "processor\t: 1\nvendor_id\t: GenuineIntel\n"
)


def test_a_field_is_the_first_line_with_that_name_stripped(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO, encoding="utf-8")
    assert (
        linux_proc.proc_field(cpuinfo, "vendor_id") == "AuthenticAMD"
    )  # the first processor's, not the last
    assert (
        linux_proc.proc_field(str(cpuinfo), "model name") == "AMD EPYC: 2 cores"
    )  # a colon in the value kept
    assert linux_proc.proc_field(cpuinfo, "model") is None  # a whole name, not a prefix of one
    assert linux_proc.proc_field(cpuinfo, "flags") is None
    assert linux_proc.proc_field(tmp_path / "absent", "vendor_id") is None


def test_available_memory_is_meminfos_kilobytes_times_1024(tmp_path: Path, monkeypatch) -> None:
    """3,000,000 kB available is 3,072,000,000 bytes (not 3,000,000,000, not 3,000,000); no MemAvailable line
    (a kernel before 3.14) or no file: None, never MemFree or MemTotal instead."""
    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(linux_proc, "MEMINFO", meminfo)
    assert linux_proc.available_memory_bytes() is None
    meminfo.write_text(MEMINFO, encoding="utf-8")
    assert linux_proc.available_memory_bytes() == 3_072_000_000
    meminfo.write_text(MEMINFO.replace("MemAvailable:    3000000 kB\n", ""), encoding="utf-8")
    assert linux_proc.available_memory_bytes() is None


def test_the_cpu_vendor_is_cpuinfos_vendor_id(tmp_path: Path, monkeypatch) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(linux_proc, "CPUINFO", cpuinfo)
    assert linux_proc.cpu_vendor() is None
    cpuinfo.write_text(CPUINFO.replace("AuthenticAMD", "GenuineIntel", 1), encoding="utf-8")
    assert linux_proc.cpu_vendor() == "GenuineIntel"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_this_machines_reading_agrees_with_psutil() -> None:
    """psutil reads MemAvailable itself (``virtual_memory().available``, bytes); the two readings are a
    moment apart, so they agree to 256 MiB, far below the factor 1000/1024 (2.3%) of a wrong unit on any
    machine with more than 11 GiB available, and a factor 1024 of none."""
    ours, theirs = linux_proc.available_memory_bytes(), psutil.virtual_memory().available
    assert ours is not None and abs(ours - theirs) < 256 * 2**20, (ours, theirs)
