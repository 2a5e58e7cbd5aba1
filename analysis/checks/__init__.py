"""Checks of what the user gives capcal and gets back, each said as one line before or after the work.

- ``input_checks``: a run's inputs against the tasks it asks for, before any model is loaded
  (``analysis.evaluation.check_inputs``).
- ``response_checks``: responses that came back empty or unreadable, and their likely cause, after a run
  (``capcal eval``, ``capcal check``).
- ``output_checks``: what a command wrote, read back after it (a full disk is a failed run, not a cut file).

What the runs given to ``capcal report`` cannot score is the report's own check
(``analysis.report.input_notices``).
"""
