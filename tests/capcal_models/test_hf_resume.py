"""Resumable sampling with capcal-hf on the real SmolLM2: its on-disk sample cache.

- ``capcal eval --model capcal-hf`` is SIGKILLed at three points of progress (read from the SQLite cache) and
  run again each time; the completed run's samples (token ids and lm-eval's logged responses per question and
  repeat) and prompt activations equal those of an uninterrupted run with its own cache; no sample committed
  before a kill is lost or generated again;
- in process: questions with some repeats cached decode only the missing ones and give the same samples;
  fully cached questions are only prefilled when their activations are missing; greedy decodes are cached;
- fast, on a random-weight 2-layer model of SmolLM2's architecture: each finished sample is committed under
  its own (request key, repeat), also when the repeats to decode are not 0..m-1, so a later run reads every
  one back and decodes only the lost one; the model identity (the cache key) names a tokenizer loaded from
  its own folder.

Both decode one row at a time (batch size 1); that decoding does not depend on the batch size or on the
other rows is checked by test_hf_batch_invariance.py. The kill test's uninterrupted reference decodes its 16
samples in one batch (batch size 16), so the comparison holds the resumed run to batch invariance too (at
batch size 1 every step is padded to the machine's row floor, 16 on Intel CPUs: the reference cost about 8x
the CPU time).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from capcal_models.hf import source_identity

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py
from sampling_checks import cloned_requests, gsm8k_task  # noqa: E402

RUN_SEED = 1234


def _rows(cache_path: Path) -> dict[tuple[str, int], tuple[str, float]]:
    """(request key, repeat) -> (value, created) of every committed sample; empty before the file exists."""
    if not cache_path.exists():
        return {}
    connection = sqlite3.connect(cache_path, timeout=60.0)
    try:
        query = "SELECT request_key, repeat, value, created FROM samples"
        return {(key, repeat): (value, created) for key, repeat, value, created in connection.execute(query)}
    except sqlite3.OperationalError:  # the table is not created yet
        return {}
    finally:
        connection.close()


def test_model_identity_changes_with_the_checkpoint_files(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"0" * 8)
    (folder / ".cache").mkdir()  # hidden folders do not count
    (folder / ".cache" / "lock").write_text("x")
    before = source_identity(str(folder))
    assert before["files"] == [["model.safetensors", 8, weights.stat().st_mtime_ns]]
    assert source_identity(str(folder)) == before
    weights.write_bytes(b"1" * 8)  # same size, new mtime
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    assert source_identity(str(folder)) != before
    assert source_identity("org/model") == {"name": "org/model"}  # a hub name: its loaded commit decides


def test_the_identity_records_the_tokenizer_loaded_from_its_own_folder(
    tiny_smollm2_path, tmp_path: Path
) -> None:
    """Catches the identity's tokenizer entry read from another attribute: a tokenizer folder apart from the
    model's must be in the sample-cache key, by its path and its files' (name, size, mtime)."""
    import shutil

    from capcal_models.hf import CapcalHFLM

    folder = tmp_path / "tokenizer"
    folder.mkdir()
    for name in ("chat_template.jinja", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(Path(tiny_smollm2_path) / name, folder / name)
    lm = CapcalHFLM(
        pretrained=str(tiny_smollm2_path),
        tokenizer=str(folder),
        batch_size=1,
        device="cpu",
        sample_cache=False,
    )
    sources = lm.model_identity()["sources"]
    assert sorted(sources) == ["pretrained", "tokenizer"]
    assert sources["pretrained"]["path"] == str(Path(tiny_smollm2_path).resolve())
    files = sorted(folder.iterdir())
    assert sources["tokenizer"] == {
        "path": str(folder.resolve()),
        "files": [[path.name, path.stat().st_size, path.stat().st_mtime_ns] for path in files],
    }


def _toy_requests(questions: int, k: int) -> list:
    """k clones (lm-eval's way: k references to one Instance) of a sampled request per question."""
    from lm_eval.api.instance import Instance

    requests = []
    for question in range(questions):
        instance = Instance(
            request_type="generate_until",
            doc={"question_id": f"toy/{question}"},
            arguments=(
                f"Question {question}: what is {question} + 2?",
                {"max_gen_toks": 5, "do_sample": True},
            ),
            idx=0,
            metadata=("toy", question, k),
        )
        requests.extend([instance] * k)
    return requests


def test_each_finished_sample_is_committed_under_its_own_repeat(
    tiny_smollm2_path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """capcal-hf's decode loop hands over finished samples as (job, index among the job's samples); the cache
    row is (request key, the repeat at that index). With repeats 0 and 2 of a question lost, a run decodes
    those two as its samples 0 and 1 and must commit them as repeats 0 and 2 (a sample committed under its
    index, or under another field of the request, is read back as the wrong repeat or not at all).

    Checked against independent readings: the SQLite rows themselves (2 questions x 3 repeats, each a JSON
    list of 5 token ids, which the tokenizer decodes to the text lm-eval got for that repeat), a third run
    that reads every sample back and decodes nothing, and a run without a cache that draws the same texts
    (the samples are seeded by repeat)."""
    from transformers import AutoTokenizer

    from capcal_models.hf import CapcalHFLM

    model = tiny_smollm2_path
    cache_path = tmp_path / "samples.sqlite"

    def lm(**cache) -> CapcalHFLM:
        return CapcalHFLM(pretrained=str(model), batch_size=2, device="cpu", seed=RUN_SEED, **cache)

    requests = _toy_requests(2, 3)
    texts, counts = _generate(lm(cache_path=str(cache_path)), requests)
    assert counts == {"cached_samples_used": 0, "samples_generated": 6}
    rows = _rows(cache_path)
    keys = sorted({key for key, _ in rows})
    assert len(keys) == 2 and sorted(rows) == [(key, repeat) for key in keys for repeat in range(3)]
    assert all(len(json.loads(value)) == 5 for value, _ in rows.values())
    # lm-eval gets each question's texts in repeat order: repeat r's text is its row's tokens, decoded
    tokenizer = AutoTokenizer.from_pretrained(model)
    decoded = {
        tuple(tokenizer.decode(json.loads(rows[(key, r)][0]), skip_special_tokens=True) for r in range(3))
        for key in keys
    }
    assert decoded == {tuple(texts[:3]), tuple(texts[3:])}
    lost = [(keys[0], 0), (keys[0], 2)]
    connection = sqlite3.connect(cache_path)
    with connection:
        connection.executemany("DELETE FROM samples WHERE request_key = ? AND repeat = ?", lost)
    connection.close()
    with caplog.at_level(logging.INFO, logger="capcal_models.hf"):
        again, counts = _generate(lm(cache_path=str(cache_path)), requests)
    assert counts == {"cached_samples_used": 4, "samples_generated": 2} and again == texts
    assert f"capcal-hf: 4 samples read from the sample cache ({cache_path}), 2 generated" in caplog.messages
    assert {row: value for row, (value, _) in _rows(cache_path).items()} == {
        row: value for row, (value, _) in rows.items()
    }
    third, counts = _generate(lm(cache_path=str(cache_path)), requests)
    assert counts == {"cached_samples_used": 6, "samples_generated": 0} and third == texts
    fresh, counts = _generate(lm(sample_cache=False), requests)
    assert counts == {"cached_samples_used": 0, "samples_generated": 6} and fresh == texts


# ------------------------------------------------------------------------------------------ real model


@pytest.fixture(scope="module")
def lm(smollm2_path, tmp_path_factory):
    from capcal_models.hf import CapcalHFLM

    cache_path = tmp_path_factory.mktemp("hf_cache") / "samples.sqlite"
    return CapcalHFLM(
        pretrained=str(smollm2_path), batch_size=1, device="cpu", seed=RUN_SEED, cache_path=str(cache_path)
    )


def _generate(lm, requests) -> tuple[list[str], dict[str, int]]:
    before = dict(lm.stats)
    texts = lm.generate_until(requests, disable_tqdm=True)
    return texts, {name: lm.stats[name] - before[name] for name in before}


@pytest.mark.slow
def test_partly_cached_questions_decode_only_their_missing_repeats(lm, tmp_path: Path) -> None:
    from capcal_models.activations import INDEX_NAME, ActivationWriter

    questions, k = 3, 4  # three questions: one loses some repeats, one all, one none
    requests = cloned_requests(gsm8k_task(lm, questions), questions, k, max_gen_toks=12)
    texts, counts = _generate(lm, requests)
    assert counts == {"cached_samples_used": 0, "samples_generated": questions * k}
    complete = _rows(lm.cache.path)
    assert len(complete) == questions * k

    # Lose repeats 1 and 3 of one question and every repeat of another: the next run decodes only those six.
    keys = list(dict.fromkeys(key for key, _ in complete))
    lost = [(keys[0], 1), (keys[0], 3)] + [(keys[2], repeat) for repeat in range(k)]
    connection = sqlite3.connect(lm.cache.path)
    with connection:
        connection.executemany("DELETE FROM samples WHERE request_key = ? AND repeat = ?", lost)
    connection.close()
    again, counts = _generate(lm, requests)
    assert counts == {"cached_samples_used": questions * k - len(lost), "samples_generated": len(lost)}
    assert again == texts
    resumed = _rows(lm.cache.path)
    assert {row: value for row, (value, _) in resumed.items()} == {
        row: value for row, (value, _) in complete.items()
    }  # token for token
    assert all(resumed[row][1] == complete[row][1] for row in complete if row not in lost)  # not rewritten

    # Everything cached: with a fresh activations folder each question is prefilled, nothing is decoded.
    lm.activation_writer = ActivationWriter(tmp_path / "activations", lm.pretrained)
    try:
        third, counts = _generate(lm, requests)
    finally:
        lm.activation_writer = None
    assert third == texts and counts == {"cached_samples_used": questions * k, "samples_generated": 0}
    index = json.loads((tmp_path / "activations" / INDEX_NAME).read_text())
    assert len(index["entries"]["capcal_gsm8k"]) == questions

    # Greedy decodes are cached once per question.
    greedy = cloned_requests(gsm8k_task(lm, 2), 2, k, max_gen_toks=8, do_sample=False, temperature=0.0)
    first, counts = _generate(lm, greedy)
    assert counts == {"cached_samples_used": 0, "samples_generated": 2}
    second, counts = _generate(lm, greedy)
    assert second == first and counts == {"cached_samples_used": 2, "samples_generated": 0}


LIMIT, K, MAX_GEN_TOKS, BATCH = 4, 4, 12, 1
# Kill once at least STEP more samples are committed than at the start of the run: at 3, 6 and 9 of 16 at
# the least, so a kill falls between the repeats of a question unless every kill overshoots to a multiple
# of K.
KILLS, STEP = 3, 3


def _runner(model: Path, cache: Path, output: Path, activations: Path, batch: int = BATCH) -> str:
    """``capcal eval ...`` as a ``python -c`` program, run in a child of ``forked_cli`` (the CLI's modules
    imported once per worker, not by each of the five runs)."""
    arguments = [
        "eval", "--model", "capcal-hf",
        "--model_args", f"pretrained={model},seed={RUN_SEED},cache_path={cache},activations={activations}",
        "--tasks", "capcal_gsm8k", "--data_dir", "bundled", "--limit", str(LIMIT), "--repeats", str(K),
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--batch_size", str(batch), "--apply_chat_template",
        "--log_samples", "--output_path", str(output),
    ]  # fmt: skip
    return f"from analysis.cli import main; raise SystemExit(main({arguments!r}))"


def _logged(output: Path) -> tuple[dict[tuple[int, int], str], dict]:
    """lm-eval's logged responses per (doc id, repeat), and the results file's config."""
    (samples_file,) = output.rglob("samples_capcal_gsm8k_*.jsonl")
    (results_file,) = output.rglob("results_*.json")
    responses = {}
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for repeat, text in enumerate(record["resps"][0]):
            responses[(record["doc_id"], repeat)] = text
    return responses, json.loads(results_file.read_text(encoding="utf-8"))["config"]


def _activations(folder: Path) -> dict[tuple[str, str], dict[str, torch.Tensor]]:
    index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    shards: dict[str, dict[str, torch.Tensor]] = {}
    found = {}
    for task, entries in index["entries"].items():
        for question, entry in entries.items():
            shard = shards.setdefault(entry["shard"], load_file(folder / entry["shard"]))
            found[(task, question)] = {name: shard[entry[name]] for name in ("last_token", "prompt_mean")}
    return found


@pytest.mark.slow
def test_a_run_killed_three_times_ends_like_an_uninterrupted_one(
    smollm2_path: Path, tmp_path: Path, forked_cli
) -> None:
    total = LIMIT * K
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    paths = {name: tmp_path / name for name in ("cache.sqlite", "out", "activations")}
    reference_paths = {name: tmp_path / f"reference-{name}" for name in paths}
    # alongside, all 16 samples in one batch
    reference_runner = _runner(smollm2_path, *reference_paths.values(), batch=total)
    reference = forked_cli.popen(reference_runner, [], tmp_path, env)

    snapshots = []  # committed rows right after each kill
    partly_cached = []  # questions with some but not all repeats committed, at each kill
    try:
        for _ in range(KILLS):
            start = len(_rows(paths["cache.sqlite"]))
            run = forked_cli.popen(_runner(smollm2_path, *paths.values()), [], tmp_path, env)
            deadline = time.monotonic() + 300
            while len(_rows(paths["cache.sqlite"])) < start + STEP and time.monotonic() < deadline:
                assert run.poll() is None, "the run ended before it could be killed"
                time.sleep(0.02)
            run.kill()  # SIGKILL: no clean-up code runs
            run.wait(timeout=60)
            rows = _rows(paths["cache.sqlite"])
            assert start + STEP <= len(rows) < total, (start, len(rows))
            snapshots.append(rows)
            per_question: dict[str, int] = {}
            for key, _ in rows:
                per_question[key] = per_question.get(key, 0) + 1
            partly_cached.append(sum(0 < count < K for count in per_question.values()))
        # Killed runs never reached their end, where activations are written: the final run has to
        # prefill the questions whose samples are all cached.
        assert not (paths["activations"] / "index.json").exists()

        final = forked_cli.run(_runner(smollm2_path, *paths.values()), [], tmp_path, 600, env)
        assert final.returncode == 0
        assert reference.wait(timeout=600) == 0
    finally:
        if reference.poll() is None:
            reference.kill()

    rows, reference_rows = _rows(paths["cache.sqlite"]), _rows(reference_paths["cache.sqlite"])
    assert len(rows) == total
    for snapshot in snapshots:  # nothing committed before a kill was lost or generated again
        assert all(rows[row] == committed for row, committed in snapshot.items())
    assert {row: value for row, (value, _) in rows.items()} == {
        row: value for row, (value, _) in reference_rows.items()
    }  # the same keys, and the same generated tokens per (question, repeat)

    responses, config = _logged(paths["out"])
    reference_responses, reference_config = _logged(reference_paths["out"])
    assert len(responses) == total and responses == reference_responses
    assert config["capcal_cached_samples_used"] == len(snapshots[-1])
    assert config["capcal_samples_generated"] == total - len(snapshots[-1])
    assert reference_config["capcal_samples_generated"] == total
    assert sum(partly_cached) > 0, partly_cached  # some kill fell between the repeats of a question

    activations, reference_activations = (
        _activations(paths["activations"]),
        _activations(reference_paths["activations"]),
    )
    assert activations.keys() == reference_activations.keys() and len(activations) == LIMIT
    for question, arrays in activations.items():
        for name, array in arrays.items():
            assert torch.equal(array, reference_activations[question][name]), (question, name)
    print(
        f"committed at the kills: {[len(s) for s in snapshots]} of {total}; partly cached questions: "
        f"{partly_cached}; final run generated {config['capcal_samples_generated']}"
    )
