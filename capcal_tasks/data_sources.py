"""Where task data comes from: the Hugging Face hub by default, a local copy when configured.

Set ``CAPCAL_DATA_DIR`` (or ``capcal eval --data_dir DIR``) to a folder laid out like capcal's bundled data
(``gsm8k/test.jsonl``, ``mmlu/test/*.csv``, ...) to read local files instead of the hub; the value ``bundled``
selects the data that ships inside the capcal package (only what its license allows, with the license).
Each task module names the relative path it reads and converts local files to the hub's schema, so the same
``process_docs`` serves both sources.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import datasets

from capcal_tasks.question_id import question_id
from capcal_tasks.records import parse_json_object
from capcal_tasks.settings import BUNDLED, DATA_DIR_ENV, data_dir

__all__ = [
    "BUNDLED_DATA_DIR",
    "HubSplit",
    "PlannedRead",
    "add_question_fields",
    "data_read_by",
    "hub_split_problem",
    "load_split",
    "local_data_dir",
    "local_files_read_by",
    "read_csv",
    "read_csv_with_columns",
    "read_jsonl",
    "shipped_with_capcal",
    "unique_questions",
]

BUNDLED_DATA_DIR = Path(__file__).resolve().parent / "data"


def local_data_dir() -> Path | None:
    """The configured local data folder (``capcal_tasks.settings.data_dir``; ``bundled`` is the data inside
    the package), or None to use the hub."""
    configured = data_dir()
    if configured == BUNDLED:
        if not BUNDLED_DATA_DIR.is_dir():
            raise FileNotFoundError(f"{DATA_DIR_ENV}={BUNDLED!r} is not a folder")
        return BUNDLED_DATA_DIR
    return configured


def unique_questions(dataset: datasets.Dataset) -> datasets.Dataset:
    """The docs whose ``question_id`` has not occurred before (the first of identical questions is kept):
    identical question text is one query x, with one capability target mu(x)."""
    first_index: dict[str, int] = {}
    for index, identifier in enumerate(dataset["question_id"][:]):
        first_index.setdefault(identifier, index)
    if len(first_index) == len(dataset):
        return dataset
    return dataset.select(sorted(first_index.values()))


def add_question_fields(
    dataset: datasets.Dataset, dataset_name: str, question_key: str, other_fields: Callable[[dict], dict]
) -> datasets.Dataset:
    """The ``process_docs`` of a task whose question is one text field: adds ``question_id`` (of the question
    as given), ``question_text`` (the question stripped) and the fields ``other_fields(doc)`` returns (e.g.
    ``gold_answer``), in that order; keeps the first of identical questions (``unique_questions``)."""

    def add_fields(doc: dict) -> dict:
        others = other_fields(doc)
        question = doc[question_key]
        return {
            "question_id": question_id(dataset_name, question),
            "question_text": question.strip(),
            **others,
        }

    return unique_questions(dataset.map(add_fields))


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSON-lines file; a malformed line raises an error naming the file and line."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                records.append(parse_json_object(line, f"{path}:{line_number}"))
    return records


def read_csv(path: Path, fieldnames: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Rows of a CSV file as dicts keyed by ``fieldnames`` (for a file without a header row) or by the file's
    header. A row with the wrong number of fields, or unparseable CSV, raises an error naming the file and
    line (the line where the row ends; quoted fields may span lines)."""
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        try:
            names = list(fieldnames) if fieldnames is not None else next(reader, None)
            if not names:
                raise ValueError(f"{path}:1: empty CSV file (expected a header row)")
            for row in reader:
                if not row:
                    continue
                if len(row) != len(names):
                    raise ValueError(
                        f"{path}:{reader.line_num}: expected {len(names)} fields ({', '.join(names)}), "
                        f"got {len(row)}"
                    )
                rows.append(dict(zip(names, row, strict=True)))
        except csv.Error as error:
            raise ValueError(f"{path}:{reader.line_num}: malformed CSV ({error})") from None
    return rows


def read_csv_with_columns(path: Path, required: Iterable[str]) -> list[dict[str, str]]:
    """Rows of a CSV file with a header row (``read_csv``) that must name every column in ``required``."""
    rows = read_csv(path)
    missing = set(required) - set(rows[0] if rows else {})
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return rows


@dataclass(frozen=True)
class HubSplit:
    """One split of a Hugging Face hub dataset: ``datasets.load_dataset(path, name, split=split)``."""

    path: str
    name: str | None
    split: str

    def load(self) -> datasets.Dataset:
        return datasets.load_dataset(self.path, self.name, split=self.split)

    def __str__(self) -> str:
        return f"{self.path}" + (f" ({self.name})" if self.name else "") + f", split {self.split!r}"


@dataclass(frozen=True)
class PlannedRead:
    """What one ``load_split`` call of a task would read: ``local_path`` under a local data folder, else the
    hub split(s) ``hub``."""

    local_path: str
    hub: tuple[HubSplit, ...]


def shipped_with_capcal(local_path: str) -> bool:
    """Whether ``local_path`` is part of the data bundled with capcal (``--data_dir bundled``)."""
    return (BUNDLED_DATA_DIR / local_path).exists()


def _hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``)."""
    return bool(datasets.config.HF_HUB_OFFLINE)


def _in_hub_cache(source: HubSplit) -> bool:
    """Whether ``source``'s dataset has been downloaded before: the ``datasets`` cache holds its prepared
    folder (``org___name``) or the hub cache its repository (``datasets--org--name``). A dataset cached
    this way loads with the hub offline."""
    import huggingface_hub.constants

    prepared = Path(datasets.config.HF_DATASETS_CACHE) / source.path.replace("/", "___")
    repository = Path(huggingface_hub.constants.HF_HUB_CACHE) / (
        "datasets--" + source.path.replace("/", "--")
    )
    return prepared.is_dir() or repository.is_dir()


def hub_split_problem(source: HubSplit, timeout_s: float = 10.0) -> str | None:
    """Why ``source`` cannot be loaded here, or None when it can (as far as can be told without loading it).

    Cached (``_in_hub_cache``): None. Not cached and the hub offline: that. Not cached and online: the hub is
    asked for the dataset's description (``huggingface_hub.HfApi.dataset_info``, at most ``timeout_s``); an
    error, or a gated dataset without a saved token, is the reason."""
    if _in_hub_cache(source):
        return None
    if _hub_offline():
        return (
            "the Hugging Face hub is offline here (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached"
        )
    import huggingface_hub

    try:
        info = huggingface_hub.HfApi().dataset_info(source.path, timeout=timeout_s)
    except Exception as error:  # noqa: BLE001 - any failure to reach it is the reason
        return f"the Hugging Face hub could not be reached for it ({type(error).__name__})"
    if getattr(info, "gated", False) and huggingface_hub.get_token() is None:
        return "it is gated on the Hugging Face hub and no token is saved (huggingface-cli login)"
    return None


def stop_lm_eval_command_line(message: str) -> None:
    """Under lm-eval's own command line (``lm_eval ...``, which shows a user error only as a traceback):
    print ``message`` as one line on stderr and exit with status 2. Elsewhere (``capcal eval``, Python)
    nothing happens and the caller raises."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if program in ("lm_eval", "lm-eval") or sys.argv[0].replace("\\", "/").endswith("lm_eval/__main__.py"):
        print(f"lm_eval: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def load_split(
    split: str,
    local_path: str,
    read_local: Callable[[Path], list[dict]],
    hub: HubSplit | Sequence[HubSplit],
) -> datasets.DatasetDict:
    """One split of a dataset as ``DatasetDict({split: ...})``.

    With a local data folder configured: ``read_local(folder / local_path)`` (records in the hub's schema).
    Otherwise the hub split(s) ``hub`` (several are concatenated, e.g. MATH's seven subject configs). Errors
    name what was looked for and where, and how to use the other source.
    """
    planned = _planned_local_reads.get()
    if planned is not None:  # data_read_by: record what would be read, read nothing
        planned.append(PlannedRead(local_path, (hub,) if isinstance(hub, HubSplit) else tuple(hub)))
        return datasets.DatasetDict({split: datasets.Dataset.from_dict({})})
    root = local_data_dir()
    if root is not None:
        path = root / local_path
        if not path.exists():
            raise FileNotFoundError(
                f"{DATA_DIR_ENV}: {path} not found (needed for split {split!r}); "
                f"unset {DATA_DIR_ENV} to load it from the Hugging Face hub"
            )
        return datasets.DatasetDict({split: datasets.Dataset.from_list(read_local(path))})
    sources = [hub] if isinstance(hub, HubSplit) else list(hub)
    try:
        parts = [source.load() for source in sources]
    except Exception as error:
        cause = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        if shipped_with_capcal(local_path):
            fix = (
                f"capcal ships this dataset ({local_path}): set {DATA_DIR_ENV}={BUNDLED} (capcal eval "
                f"--data_dir {BUNDLED})"
            )
        else:
            fix = (
                f"to read a local copy instead, set {DATA_DIR_ENV} (capcal eval --data_dir DIR) to a folder "
                f"holding {local_path}"
            )
        message = f"could not load {'; '.join(map(str, sources))} from the Hugging Face hub ({cause}); {fix}"
        stop_lm_eval_command_line(message)
        raise RuntimeError(message) from error
    return datasets.DatasetDict(
        {split: parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)}
    )


_planned_local_reads: ContextVar[list[PlannedRead] | None] = ContextVar(
    "capcal_planned_local_reads", default=None
)


def data_read_by(loader: Callable[..., datasets.DatasetDict], **kwargs) -> list[PlannedRead]:
    """What a task's ``custom_dataset`` function reads: one ``PlannedRead`` per ``load_split`` call.

    ``loader(**kwargs)`` is called while ``load_split`` records its ``local_path`` and hub split(s) and
    returns an empty split instead of reading anything (from a folder or the hub). A loader that does not go
    through ``load_split`` (generated data, an earlier run's samples file) reads no data-folder file and runs
    as usual.
    """
    planned: list[PlannedRead] = []
    token = _planned_local_reads.set(planned)
    try:
        loader(**kwargs)
    finally:
        _planned_local_reads.reset(token)
    return planned


def local_files_read_by(loader: Callable[..., datasets.DatasetDict], **kwargs) -> list[str]:
    """The paths, relative to the local data folder, that a task's ``custom_dataset`` function reads there
    (the ``local_path`` of each ``data_read_by`` entry)."""
    return [read.local_path for read in data_read_by(loader, **kwargs)]
