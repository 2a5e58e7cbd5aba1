"""capcal-api's counters and the one line it logs per call. The counts of real calls (retries by cause,
cached samples) are checked against a real server in test_api.py."""

from __future__ import annotations

import copy

from capcal_models.api_stats import call_counts, call_summary, new_api_stats


def test_a_calls_counts_are_the_increase_since_it_began() -> None:
    stats = new_api_stats()
    stats.update(samples_needed=10, cached_samples_used=4, requests_sent=3, retries=1)
    stats["retries_by_cause"] = {"timeout": 1}
    before = copy.deepcopy(stats)
    stats.update(samples_needed=16, requests_needed=2, requests_sent=7, samples_received=6, retries=3)
    stats["retries_by_cause"] = {"timeout": 1, "http_503": 2}
    counts, by_cause = call_counts(stats, before)
    assert counts["samples_needed"] == 6 and counts["cached_samples_used"] == 0
    assert counts["requests_sent"] == 4 and counts["retries"] == 2 and counts["samples_received"] == 6
    assert by_cause == {"http_503": 2}  # causes that did not grow are left out
    assert set(counts) == {name for name, value in new_api_stats().items() if isinstance(value, int)}


def test_the_summary_line_says_every_count() -> None:
    counts = dict.fromkeys(new_api_stats(), 0)
    del counts["retries_by_cause"]
    counts.update(
        samples_needed=12,
        cached_samples_used=4,
        requests_needed=2,
        requests_sent=5,
        samples_received=7,
        retries=3,
        failed_requests=1,
        missing_samples=1,
    )
    line = call_summary("capcal-api", "sampling", counts, {"connection": 1, "http_429": 2})
    assert line == (
        "capcal-api sampling: 12 samples needed, 4 from the cache; 2 requests (5 HTTP attempts), 7 samples "
        "received; 3 retries (connection 1, http_429 2); 1 requests failed (1 samples missing)"
    )
    assert "retries;" in call_summary("capcal-api", "sampling", counts, {})
