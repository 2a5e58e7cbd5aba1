"""Confidence elicitation tasks: verbalized confidence, P(True) and Self-Calibration's per-response check.

The capability forms run on a dataset split; the response forms and the self-check read the responses of an
earlier sampling run (``earlier_run``).
"""
