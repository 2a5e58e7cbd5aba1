"""capcal-api's counters: what each call needed, took from the cache, sent, received, retried and lost.

One dict per model object (``new_api_stats``), incremented by capcal-api (samples and requests needed, cached
samples used, failures) and by ``capcal_models.http_transport`` (HTTP attempts, samples received, retries by
cause). It goes whole into the results JSON (``config.capcal_api_stats``); ``call_summary`` is the one line
logged per lm-eval call, from the counts since that call began (``call_counts``). A plain dict: JSON as it is.
"""

from __future__ import annotations

__all__ = ["call_counts", "call_summary", "new_api_stats"]


def new_api_stats() -> dict:
    """Every counter at 0."""
    return {
        "samples_needed": 0,  # samples the calls asked for (one per question when greedy)
        "cached_samples_used": 0,  # of those, read from the sample cache
        "requests_needed": 0,  # requests for the rest (after the cache)
        "requests_sent": 0,  # HTTP attempts, retries included
        "samples_received": 0,
        "retries": 0,
        "retries_by_cause": {},  # http_<status>, timeout, connection, invalid_response
        "failed_requests": 0,  # still failing after max_retries
        "missing_samples": 0,
    }


def call_counts(stats: dict, before: dict) -> tuple[dict[str, int], dict[str, int]]:
    """The counters' increase since ``before`` (a copy taken when the call began), and the retries by cause
    that increased, sorted by cause."""
    counts = {name: value - before[name] for name, value in stats.items() if isinstance(value, int)}
    earlier = before["retries_by_cause"]
    by_cause = {
        cause: count - earlier.get(cause, 0)
        for cause, count in sorted(stats["retries_by_cause"].items())
        if count > earlier.get(cause, 0)
    }
    return counts, by_cause


def call_summary(backend: str, what: str, counts: dict[str, int], by_cause: dict[str, int]) -> str:
    """One line: what a call needed, took from the cache, sent and received, retried and lost."""
    causes = ", ".join(f"{cause} {count}" for cause, count in by_cause.items())
    return (
        f"{backend} {what}: {counts['samples_needed']} samples needed, {counts['cached_samples_used']} from "
        f"the cache; {counts['requests_needed']} requests ({counts['requests_sent']} HTTP attempts), "
        f"{counts['samples_received']} samples received; {counts['retries']} retries"
        f"{f' ({causes})' if causes else ''}; {counts['failed_requests']} requests failed "
        f"({counts['missing_samples']} samples missing)"
    )
