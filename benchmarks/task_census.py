"""Census of lm-eval's tasks under capcal's admission rule for k-sample scoring (capcal_tasks.task_admission).

Every task lm-eval's own task index holds (its installed task folder; groups and tags are not tasks) is read
as the index reads it (includes merged, ``!function`` entries not imported) and either admitted by ``admit``
or refused with the first rule it fails. Printed: the totals per rule, then one row per family (the task's
folder under ``lm_eval/tasks``) as a markdown table, the table of docs/any-task.md.

    python benchmarks/task_census.py [--families 25]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

from capcal_tasks.task_admission import RefusedTask, admit

# the first rule a refusal message names (capcal_tasks.task_admission's messages, in the rule's order)
RULES = (
    ("Python task class", "class-based"),
    ("output_type is", "not generate_until"),
    ("already samples", "already repeated"),
    ("scores a vote", "voting pipeline"),
    ("not take_first", "final filter not take_first"),
    ("corpus-level", "corpus metrics only"),
    ("no per-response 0/1 metric", "no 0/1 mean metric"),
)


def rule_of(message: str) -> str:
    """The refusal rule a message of ``admit`` states."""
    for marker, rule in RULES:
        if marker in message:
            return rule
    return "other"


def census() -> tuple[Counter, dict[str, Counter]]:
    """(totals by outcome, {family: outcomes}) over every task of lm-eval's own index."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager()
    totals: Counter = Counter()
    families: dict[str, Counter] = defaultdict(Counter)
    for name, entry in manager.task_index.items():
        if entry.kind.name not in ("TASK", "PY_TASK") or entry.yaml_path is None:
            continue
        parts = Path(entry.yaml_path).parts
        family = parts[parts.index("tasks") + 1] if "tasks" in parts else "?"
        config = entry.cfg or {}
        generative = config.get("output_type") == "generate_until" or "class" in config
        try:
            admit(name, config)
            outcome = "admitted"
        except RefusedTask as refusal:
            outcome = rule_of(str(refusal))
        totals[outcome] += 1
        families[family][outcome] += 1
        if generative:
            totals["generate_until or class"] += 1
            families[family]["generate_until or class"] += 1
    return totals, families


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=0, help="rows of the family table (0: all)")
    args = parser.parse_args()
    totals, families = census()
    print(f"tasks: {sum(v for k, v in totals.items() if k != 'generate_until or class')}")
    for outcome, count in totals.most_common():
        print(f"  {outcome}: {count}")
    columns = ["admitted", *(rule for _, rule in RULES if rule != "not generate_until")]
    print()
    print("| family | tasks | generative | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * (len(columns) + 2))
    rows = sorted(families.items(), key=lambda item: (-item[1]["generate_until or class"], item[0]))
    rows = [row for row in rows if row[1]["generate_until or class"]]
    admitted_families = sum(1 for _, counts in rows if counts["admitted"])
    for family, counts in rows[: args.families or None]:
        every = sum(count for outcome, count in counts.items() if outcome != "generate_until or class")
        cells = [str(every), str(counts["generate_until or class"]), *(str(counts[c]) for c in columns)]
        print(f"| {re.sub(r'[|]', '/', family)} | " + " | ".join(cells) + " |")
    print(f"\nfamilies with a generative task: {len(rows)}; with an admitted task: {admitted_families}")


if __name__ == "__main__":
    main()
