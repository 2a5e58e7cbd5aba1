"""Capability-confidence estimators built from lm-eval logs.

The estimators are those of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540) plus
Self-Calibration's per-response check ("Efficient Test-Time Scaling via Self-Calibration", arXiv 2503.00031):

* :mod:`.adaptive` — the capability metrics of an adaptively sampled run (per-question stops and a
  stopping plan), unbiased after the stop; :mod:`.adaptive_replay` replays a plan on a fixed-k run's samples
  and :mod:`.adaptive_simulation` simulates the metrics against fixed-k sampling;
* :mod:`.consistency` — response consistency for k drawn responses, in the paper's form and leakage-free;
* :mod:`.elicited` — verbalized confidence, P(True) and Self-Calibration's per-response check, read from the
  confidence tasks' logs and joined to the per-question table by question id, with parse-failure counts;
* :mod:`.probes` — linear probes on prompt activations (paper probe, ridge, per-layer) with split guards;
* :mod:`.recalibration` — isotonic recalibration fitted on a calibration split;
* :mod:`.split_guard` — what the fitted estimators remember of their training questions, and the refusal to
  score them.

Estimators that are fitted (probes, isotonic) refuse to score the questions they were fitted or tuned on
(:class:`SplitLeakageError`).
"""

from .consistency import (
    AnswerClasses,
    LeakageFreeConsistency,
    consistency_from_table,
    encode_answer_classes,
    leakage_free_consistency,
    modal_count,
    response_consistency,
)
from .elicited import ELICITED_KINDS, attach_elicited, parse_failure_counts, read_elicited
from .probes import LinearProbe, ProbeConfig, QuestionSplits, fit_probe, load_probe
from .recalibration import IsotonicRecalibrator, fit_isotonic, isotonic_fit_points, load_isotonic
from .split_guard import SplitLeakageError

__all__ = [
    "ELICITED_KINDS",
    "AnswerClasses",
    "IsotonicRecalibrator",
    "LeakageFreeConsistency",
    "LinearProbe",
    "ProbeConfig",
    "QuestionSplits",
    "SplitLeakageError",
    "attach_elicited",
    "consistency_from_table",
    "encode_answer_classes",
    "fit_isotonic",
    "fit_probe",
    "isotonic_fit_points",
    "leakage_free_consistency",
    "load_isotonic",
    "load_probe",
    "modal_count",
    "parse_failure_counts",
    "read_elicited",
    "response_consistency",
]
