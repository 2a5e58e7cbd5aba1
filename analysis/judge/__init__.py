"""The LLM judge of the paper "On Calibration of LLMs: From Response To Capability": a checker for
``capcal rescore`` that re-labels TriviaQA, SimpleQA and MATH responses through any OpenAI-compatible server.

``prompts`` holds the prompts (OpenAI simple-evals, MIT), ``verdicts`` the strict verdict parser, ``client``
the cached, concurrent HTTP client, ``checker`` the ``JudgeChecker``, and ``agreement`` reads judge-vs-rule
agreement from a rescored run.
"""

from analysis.judge.checker import JudgeChecker

__all__ = ["JudgeChecker"]
