"""Time limits in tests that hold under load: CPU time instead of wall-clock time, or a wall-clock limit
scaled by how contended the machine is right now.

A test on a machine shared with other work (two cores, several test workers) can take several times its
usual wall-clock time without doing more work: ``nested_boxes_10k_deep`` took 4.37 s against a 3.0 s limit
at a load of 6-8. What a bound on work should measure is the CPU time of the process (``cpu_seconds``), which
other processes do not inflate. A bound on waiting (a timeout that must fire, a background thread that must
commit) cannot use CPU time; it is scaled by ``contention()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

CALIBRATION_LOOP = 300_000  # a pure-Python loop of about 10-20 ms on an idle core


def cpu_seconds(function: Callable[[], Any]) -> tuple[Any, float]:
    """``function()`` and the CPU time (user + system, all threads of this process) it took."""
    start = time.process_time()
    value = function()
    return value, time.process_time() - start


def contention() -> float:
    """How many times longer than its CPU time a fixed pure-Python loop takes in wall-clock time now (>= 1):
    about 1 on an idle machine, about the load per core on a busy one."""
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0
    for number in range(CALIBRATION_LOOP):
        total += number
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    return max(1.0, wall / max(cpu, 1e-3))
