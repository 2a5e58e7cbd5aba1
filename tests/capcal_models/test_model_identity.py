"""Model identity on the real SmolLM2 checkpoint: what was loaded, not the name it was loaded under."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from capcal_models.model_identity import (
    checkpoint_files,
    checkpoint_fingerprint,
    model_fingerprint_from_args,
    parse_model_args,
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """A fresh fingerprint cache per test (CAPCAL_HOME), so every test hashes for real."""
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "capcal_home"))


def _linked_copy(source: Path, target: Path, real: tuple[str, ...] = ()) -> Path:
    """A checkpoint folder whose files are symlinks to ``source``'s, except ``real`` (copied bytes)."""
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.name in real:
            shutil.copyfile(path, target / path.name)
        else:
            os.symlink(path, target / path.name)
    return target


def test_fingerprint_is_content_not_path(smollm2_path: Path, tmp_path: Path) -> None:
    fingerprint = checkpoint_fingerprint(smollm2_path)
    assert fingerprint.startswith("sha256:") and len(fingerprint) == len("sha256:") + 64
    assert checkpoint_fingerprint(f"{smollm2_path}/") == fingerprint  # trailing slash
    os.symlink(smollm2_path, tmp_path / "link")
    assert checkpoint_fingerprint(tmp_path / "link") == fingerprint  # a symlink to the folder
    copy = _linked_copy(smollm2_path, tmp_path / "copy", real=("model.safetensors", "config.json"))
    assert checkpoint_fingerprint(copy) == fingerprint  # another path, the same bytes


def test_one_changed_weight_byte_is_another_model(smollm2_path: Path, tmp_path: Path) -> None:
    copy = _linked_copy(smollm2_path, tmp_path / "changed", real=("model.safetensors",))
    weights = copy / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.seek(weights.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x01]))
    assert checkpoint_fingerprint(copy) != checkpoint_fingerprint(smollm2_path)


def test_tokenizer_and_config_count_the_manifest_does_not(smollm2_path: Path, tmp_path: Path) -> None:
    original = checkpoint_fingerprint(smollm2_path)
    names = {path.name for path in checkpoint_files(smollm2_path)}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "capcal_model.json" not in names  # holds a preparation time: two preparations must agree

    manifest = _linked_copy(smollm2_path, tmp_path / "manifest", real=("capcal_model.json",))
    data = json.loads((manifest / "capcal_model.json").read_text())
    (manifest / "capcal_model.json").write_text(json.dumps({**data, "prepared_at": "2030-01-01T00:00:00Z"}))
    assert checkpoint_fingerprint(manifest) == original

    tokenizer = _linked_copy(smollm2_path, tmp_path / "tokenizer", real=("tokenizer_config.json",))
    config = json.loads((tokenizer / "tokenizer_config.json").read_text())
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 7}))
    assert checkpoint_fingerprint(tokenizer) != original


def test_cache_follows_changes(smollm2_path: Path, tmp_path: Path) -> None:
    """The per-file cache is keyed by (path, size, mtime): an edit in place is hashed again."""
    copy = _linked_copy(smollm2_path, tmp_path / "edit", real=("config.json",))
    before = checkpoint_fingerprint(copy)
    assert any((tmp_path / "capcal_home" / "cache" / "fingerprints").iterdir())
    assert checkpoint_fingerprint(copy) == before  # cached
    config = copy / "config.json"
    text = config.read_text()
    config.write_text(text.replace('"hidden_size": 576', '"hidden_size": 577'))
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))
    assert checkpoint_fingerprint(copy) != before


def test_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        checkpoint_fingerprint(tmp_path / "missing")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="not a checkpoint"):
        checkpoint_fingerprint(tmp_path)


def test_model_args_forms(smollm2_path: Path, tmp_path: Path) -> None:
    fingerprint = checkpoint_fingerprint(smollm2_path)
    plain = model_fingerprint_from_args("hf", f"pretrained={smollm2_path},dtype=float32")
    slash = model_fingerprint_from_args("capcal-hf", f"pretrained={smollm2_path}/")
    mapping = model_fingerprint_from_args("hf", {"pretrained": str(smollm2_path)})
    assert plain["fingerprint"] == slash["fingerprint"] == mapping["fingerprint"] == fingerprint
    assert plain["source"] == "checkpoint" and slash["label"] == str(smollm2_path)  # label without "/"

    missing = model_fingerprint_from_args("hf", f"pretrained={tmp_path}/gone")
    assert missing["fingerprint"] is None and missing["source"] == "unresolved"
    assert "not a local checkpoint" in missing["reason"]
    api = model_fingerprint_from_args("capcal-api", "base_url=http://localhost:1/v1")
    assert api["source"] == "unresolved" and api["label"] == "capcal-api"
    assert parse_model_args("a=1, b = x,,") == {"a": "1", "b": "x"}


def test_one_model_args_parser_keeps_text_or_parses_values_as_lm_eval_does():
    from lm_eval.utils import simple_parse_args_string

    text = "pretrained=/m,batch_size=8,trust_remote_code=True,dtype=float32,revision=01"
    assert parse_model_args(text) == {
        "pretrained": "/m",
        "batch_size": "8",
        "trust_remote_code": "True",
        "dtype": "float32",
        "revision": "01",
    }
    assert parse_model_args(text, typed=True) == simple_parse_args_string(text)
    assert parse_model_args('{"pretrained": "/m", "max_length": 512}') == {
        "pretrained": "/m",
        "max_length": 512,
    }
    assert parse_model_args({1: "x"}) == {"1": "x"} and parse_model_args(None, typed=True) == {}
    for bad, message in [
        ("pretrained=/m,oops", "gen_kwargs: expected key=value or a JSON object, got 'oops'"),
        ("{not json", "gen_kwargs: not valid JSON"),
        ("[1, 2]", "gen_kwargs: expected a JSON object"),
        (3, "gen_kwargs: expected text or a mapping, got int"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            parse_model_args(bad, typed=True, what="gen_kwargs")
    # A results file with arguments no parser accepts: the model is unresolved, with the reason.
    odd = model_fingerprint_from_args("hf", "pretrained=/m,oops")
    assert odd["source"] == "unresolved" and "expected key=value" in odd["reason"]


def test_a_checkpoints_files_are_listed_by_name_whatever_their_pattern(tmp_path: Path) -> None:
    """``checkpoint_files``: the files that define the model, sorted by name (not in the order of the
    patterns that found them, nor of the folder), the manifest and other files left out."""
    for name in ("vocab.json", "tokenizer.json", "config.json", "model.safetensors", "added_tokens.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "capcal_model.json").write_text("{}")
    (tmp_path / "README.md").write_text("notes")
    assert [path.name for path in checkpoint_files(tmp_path)] == [
        "added_tokens.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.json",
    ]
