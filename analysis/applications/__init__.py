"""Applications of capability confidences, all evaluated exactly on the real samples.

The applications of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540) — pass@k
prediction, budget allocation, routing — and the test-time strategies of "Efficient Test-Time Scaling via
Self-Calibration" (arXiv 2503.00031):

* :mod:`.pass_at_k_prediction` — instance-level MSE and dataset-level curves of predicted pass@k, with the
  Oracle-CC and Oracle-RC baselines (Oracle-RC as an exact expectation, Monte Carlo optional);
* :mod:`.budget` — greedy marginal-gain allocation of a sampling budget (closed form), uniform and oracle
  baselines, accuracy as the exact mean unbiased pass@b (the paper's Monte-Carlo protocol optional);
* :mod:`.self_calibration_strategies` — Self-Calibration's early stopping, confidence-weighted and adaptive
  self-consistency on per-response confidences;
* :mod:`.routing` — routing from a cheap to a strong model by the cheap model's confidence (exact expected
  accuracy against random and oracle routing).
"""

from .budget import (
    DEFAULT_BUDGETS,
    MonteCarloAccuracy,
    budget_allocation_curves,
    exact_budget_accuracy,
    greedy_allocation,
    greedy_allocations,
    monte_carlo_budget_accuracy,
    uniform_allocation,
)
from .pass_at_k_prediction import DEFAULT_KS, dataset_curve, instance_mse, oracle_rc_mse, pass_at_k_prediction
from .routing import DEFAULT_FRACTIONS, pair_models, routing_accuracy, routing_curves
from .self_calibration_strategies import (
    DEFAULT_TAUS,
    StrategyInputs,
    adaptive_self_consistency,
    early_stopping,
    prepare_strategy_inputs,
    self_calibration_curves,
    soft_self_consistency,
    vote_accuracy_by_n,
)

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_FRACTIONS",
    "DEFAULT_KS",
    "DEFAULT_TAUS",
    "MonteCarloAccuracy",
    "StrategyInputs",
    "adaptive_self_consistency",
    "budget_allocation_curves",
    "dataset_curve",
    "early_stopping",
    "exact_budget_accuracy",
    "greedy_allocation",
    "greedy_allocations",
    "instance_mse",
    "monte_carlo_budget_accuracy",
    "oracle_rc_mse",
    "pair_models",
    "pass_at_k_prediction",
    "prepare_strategy_inputs",
    "routing_accuracy",
    "routing_curves",
    "self_calibration_curves",
    "soft_self_consistency",
    "uniform_allocation",
    "vote_accuracy_by_n",
]
