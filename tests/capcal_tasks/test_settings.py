"""capcal_tasks.settings: capcal's configuration from the environment (cache and data folders, booleans)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capcal_tasks import settings
from capcal_tasks.data_sources import BUNDLED_DATA_DIR, local_data_dir


def test_capcal_home_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "home"))
    assert settings.capcal_home() == (tmp_path / "home").resolve()
    monkeypatch.delenv("CAPCAL_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.capcal_home() == (tmp_path / "xdg" / "capcal").resolve()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert settings.capcal_home() == (tmp_path / "user" / ".cache" / "capcal").resolve()


def test_data_dir_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.DATA_DIR_ENV == "CAPCAL_DATA_DIR"
    monkeypatch.delenv(settings.DATA_DIR_ENV, raising=False)
    assert settings.data_dir() is None and local_data_dir() is None  # the hub
    monkeypatch.setenv(settings.DATA_DIR_ENV, "  ")
    assert settings.data_dir() is None
    monkeypatch.setenv(settings.DATA_DIR_ENV, "bundled")
    assert settings.data_dir() == "bundled" and local_data_dir() == BUNDLED_DATA_DIR
    monkeypatch.setenv(settings.DATA_DIR_ENV, str(tmp_path))
    assert settings.data_dir() == tmp_path.resolve() == local_data_dir()
    monkeypatch.setenv(settings.DATA_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"CAPCAL_DATA_DIR='.*missing' is not a folder"):
        settings.data_dir()


@pytest.mark.parametrize(
    "value, expected",
    [(True, True), (False, False), (1, True), (0, False), (None, False), ("true", True), (" Yes ", True),
     ("ON", True), ("1", True), ("false", False), ("No", False), ("off", False), ("0", False)],
)  # fmt: skip
def test_parse_bool(value: object, expected: bool) -> None:
    assert settings.parse_bool(value) is expected


@pytest.mark.parametrize("value", ["", "maybe", "truee", "2"])
def test_parse_bool_refuses_other_words(value: str) -> None:
    with pytest.raises(ValueError, match="not a boolean"):
        settings.parse_bool(value)
