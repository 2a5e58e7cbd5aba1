"""lm-eval's task index kept on disk between processes (``capcal_tasks.task_index``): a read is lm-eval's own
build of the same tree, a changed tree is built again, the build's warnings are said again, and what JSON
cannot hold exactly is never cached."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from lm_eval.tasks._index import TaskIndex

from capcal_tasks import task_index
from capcal_tasks.task_index import build_or_read_task_index, index_cache_file, tree_fingerprint
from capcal_tasks.task_names import lm_eval_tasks_dir


def _tree(folder: Path) -> Path:
    """A small task tree: a task with a tag and a ``!function``, a group, a template without the .yaml
    suffix that a task includes, and a second task of the first's name (lm-eval warns and skips it)."""
    folder.mkdir()
    (folder / "_template_yaml").write_text("dataset_path: json\noutput_type: generate_until\n")
    (folder / "alpha.yaml").write_text(
        "include: _template_yaml\ntask: alpha\ntag: [letters]\nprocess_docs: !function utils.docs\n"
    )
    (folder / "group.yaml").write_text("group: both\ntask: [alpha, beta]\n")
    sub = folder / "sub"
    sub.mkdir()
    (sub / "beta.yaml").write_text('task: beta\ndataset_path: json\ngeneration_kwargs: {until: ["\\n"]}\n')
    (sub / "zeta.yaml").write_text("task: alpha\ndataset_path: other\n")  # a duplicate name
    return folder


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(paths, **kwargs):
        raise AssertionError("the tree was parsed again")

    monkeypatch.setattr(TaskIndex, "build", staticmethod(refuse))


def _touch_later(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_read_is_lm_evals_own_build_of_the_tree_and_parses_nothing(tmp_path, monkeypatch, caplog):
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "cache" / "index.json"
    expected = TaskIndex.build([tree])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=TaskIndex.__module__):
        built = build_or_read_task_index(tree, cache)
    said = [r.getMessage() for r in caplog.records if r.name == TaskIndex.__module__]
    assert len(said) == 1 and "Duplicate task name 'alpha'" in said[0]
    assert cache.is_file()
    _no_build(monkeypatch)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=TaskIndex.__module__):
        read = build_or_read_task_index(tree, cache)
    assert [r.getMessage() for r in caplog.records if r.name == TaskIndex.__module__] == said
    for index in (built, read):
        assert list(index) == list(expected)  # the same names in the same order
        assert list(index.values()) == list(expected.values())  # kind, path, config, tags
    alpha = read["alpha"]
    assert alpha.yaml_path == tree / "alpha.yaml" and isinstance(alpha.yaml_path, Path)
    assert alpha.cfg["dataset_path"] == "json" and alpha.cfg["process_docs"] == str(tree / "utils.docs")
    assert read["letters"].tags == {"alpha"} and read["letters"].yaml_path is None
    assert read["beta"].cfg["generation_kwargs"] == {"until": ["\n"]}


@pytest.mark.parametrize(
    "change",
    ["an included template edited", "a task added", "a task removed", "a file touched"],
)
def test_a_changed_tree_is_built_again(tmp_path, change):
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    build_or_read_task_index(tree, cache)
    if change == "an included template edited":  # not a *.yaml file: still part of the tree
        (tree / "_template_yaml").write_text("dataset_path: csv\noutput_type: generate_until\n")
    elif change == "a task added":
        (tree / "sub" / "gamma.yaml").write_text("task: gamma\ndataset_path: json\n")
    elif change == "a task removed":
        (tree / "group.yaml").unlink()
    else:
        _touch_later(tree / "sub" / "beta.yaml")
    read = build_or_read_task_index(tree, cache)
    assert list(read.items()) == list(TaskIndex.build([tree]).items())
    assert json.loads(cache.read_text())["fingerprint"] == tree_fingerprint(tree)


def test_bytecode_does_not_count_as_a_change(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    build_or_read_task_index(tree, cache)
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "utils.cpython-311.pyc").write_bytes(b"\0")
    _no_build(monkeypatch)
    assert "alpha" in build_or_read_task_index(tree, cache)


def test_the_fingerprint_sees_size_time_and_name_but_not_the_folders_place(tmp_path):
    tree = _tree(tmp_path / "tasks")
    first = tree_fingerprint(tree)
    assert tree_fingerprint(tree) == first
    moved = tmp_path / "elsewhere"
    tree.rename(moved)
    assert tree_fingerprint(moved) == first  # relative paths: the cache file's name carries the folder
    (moved / "alpha.yaml").rename(moved / "alpha2.yaml")
    renamed = tree_fingerprint(moved)
    assert renamed != first
    _touch_later(moved / "group.yaml")
    touched = tree_fingerprint(moved)
    assert touched != renamed
    stat = (moved / "group.yaml").stat()
    (moved / "group.yaml").write_text("group: both\ntask: [alpha, betb]\n")  # same size and time
    os.utime(moved / "group.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert tree_fingerprint(moved) == touched  # what (size, time) cannot see, as for the model fingerprints


def test_a_dangling_link_is_no_error_and_its_name_counts(tmp_path):
    """A link to nothing (or a file removed while the tree is walked) in the tree: no error, and adding it
    is a change of the tree."""
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    build_or_read_task_index(tree, cache)
    before = tree_fingerprint(tree)
    (tree / "gone.yaml").symlink_to(tmp_path / "nothing.yaml")
    assert tree_fingerprint(tree) != before
    assert list(build_or_read_task_index(tree, cache).items()) == list(TaskIndex.build([tree]).items())
    assert json.loads(cache.read_text())["fingerprint"] == tree_fingerprint(tree)


@pytest.mark.parametrize(
    ("line", "why"),
    [("num_fewshot: .nan\n", "NaN"), ("seed: {1: 2}\n", "an int key"), ("date: 2020-01-02\n", "a date")],
)
def test_a_config_json_cannot_hold_is_never_cached(tmp_path, line, why):
    tree = _tree(tmp_path / "tasks")
    (tree / "odd.yaml").write_text(f"task: odd\ndataset_path: json\n{line}")
    cache = tmp_path / "index.json"
    index = build_or_read_task_index(tree, cache)
    assert not cache.exists(), why
    assert index["odd"].cfg == TaskIndex.build([tree])["odd"].cfg


@pytest.mark.parametrize(
    "content",
    ["", "{", "[]", '{"format": 1}', '{"format": 0, "fingerprint": "x", "warnings": [], "entries": []}'],
)
def test_an_unreadable_or_foreign_cache_file_is_built_again_and_replaced(tmp_path, content):
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    cache.write_text(content)
    assert list(build_or_read_task_index(tree, cache).items()) == list(TaskIndex.build([tree]).items())
    assert json.loads(cache.read_text())["format"] == task_index.INDEX_CACHE_FORMAT


def test_a_cache_file_of_another_tree_state_is_not_read(tmp_path, monkeypatch):
    """The right layout and format but another fingerprint (as after an upgrade in place): built again."""
    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    build_or_read_task_index(tree, cache)
    content = json.loads(cache.read_text())
    content["entries"] = []
    content["fingerprint"] = "0" * 64
    cache.write_text(json.dumps(content))
    assert "alpha" in build_or_read_task_index(tree, cache)


def test_a_cache_folder_that_cannot_be_written_still_gives_the_index(tmp_path):
    tree = _tree(tmp_path / "tasks")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    index = build_or_read_task_index(tree, blocker / "index.json")
    assert list(index.items()) == list(TaskIndex.build([tree]).items())
    assert blocker.read_text() == "a file where the cache folder would be"
    assert not list(tmp_path.glob("**/.index.json.*.tmp"))


def test_the_cache_file_is_per_folder_lm_eval_version_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "home"))
    one, two = index_cache_file(tmp_path / "a"), index_cache_file(tmp_path / "b")
    assert one != two and one.parent == tmp_path / "home" / "cache" / "lm_eval"
    assert index_cache_file(tmp_path / "x" / ".." / "a") == one  # the resolved folder
    monkeypatch.setattr(task_index, "version", lambda name: "0.0.0")
    assert index_cache_file(tmp_path / "a") != one


@pytest.mark.slow
def test_lm_evals_own_tree_is_cached_and_read_back_exactly(tmp_path, monkeypatch):
    """The installed lm-eval's ~14,000 YAMLs: the cache file is written (every config JSON-exact) and its
    read equals the build, entry by entry and in order."""
    cache = tmp_path / "index.json"
    built = build_or_read_task_index(lm_eval_tasks_dir(), cache)
    assert cache.is_file() and len(built) > 10_000
    _no_build(monkeypatch)
    read = build_or_read_task_index(lm_eval_tasks_dir(), cache)
    assert list(read) == list(built)
    assert list(read.values()) == list(built.values())


def test_a_second_process_waits_for_the_first_ones_build_and_reads_it(tmp_path, monkeypatch):
    """Two ``capcal eval`` starting together parse the tree once: while another process holds the lock
    (its build under way) a caller that found no file waits, then reads the file that process wrote."""
    import fcntl
    import threading

    tree = _tree(tmp_path / "tasks")
    cache = tmp_path / "index.json"
    expected = build_or_read_task_index(tree, tmp_path / "made-elsewhere.json")
    first_read = threading.Event()
    read = task_index._read_index

    def reading(*args):
        found = read(*args)
        first_read.set()
        return found

    monkeypatch.setattr(task_index, "_read_index", reading)
    _no_build(monkeypatch)
    results: list = []
    with (tmp_path / "index.json.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the other process, building
        waiting = threading.Thread(target=lambda: results.append(build_or_read_task_index(tree, cache)))
        waiting.start()
        assert first_read.wait(60)
        waiting.join(1.0)
        assert waiting.is_alive()  # blocked on the lock, not building
        (tmp_path / "made-elsewhere.json").rename(cache)  # the other process's file, written whole
    waiting.join(60)
    assert not waiting.is_alive()
    assert list(results[0].items()) == list(expected.items())
