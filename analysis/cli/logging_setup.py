"""Logging of a ``capcal`` run: lm-eval's log level and capcal_models' INFO lines on stderr."""

from __future__ import annotations

import logging
import sys


class StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (which a caller such as pytest may replace between runs)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def log_capcal_models_to_stderr() -> None:
    """Show capcal_models' INFO logs (retries, the API models' summary lines) beside lm-eval's, which
    configures only its own logger; once per process."""
    models_logger = logging.getLogger("capcal_models")
    if not models_logger.handlers:
        handler = StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s"))
        models_logger.addHandler(handler)
        models_logger.setLevel(logging.INFO)


def set_up_run_logging(verbosity: str | None) -> None:
    """lm-eval's logging at ``verbosity`` (default INFO, ``lm_eval.utils.setup_logging``) and capcal_models'
    INFO lines on stderr."""
    from lm_eval.utils import setup_logging

    setup_logging(verbosity or logging.INFO)
    log_capcal_models_to_stderr()
