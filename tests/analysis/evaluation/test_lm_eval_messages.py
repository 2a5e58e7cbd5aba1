"""lm-eval's misleading lines: git's "fatal: not a git repository" explained once when it will appear."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.evaluation.lm_eval_messages import git_dir_for_lm_eval, git_notice

CHECKOUT = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_git_dir(monkeypatch):
    monkeypatch.delenv("GIT_DIR", raising=False)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_notice_explains_the_line_git_prints_outside_a_repository(tmp_path, no_git_dir):
    """A wheel install (no .git above capcal's packages) run from a folder in no repository: git prints the
    explained line, and the notice names it and the folder."""
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    folder = tmp_path / "work"
    folder.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    git = subprocess.run(["git", "describe", "--always"], cwd=folder, env=env, capture_output=True, text=True)
    assert git.returncode != 0 and "fatal: not a git repository" in git.stderr
    notice = git_notice(folder, checkout=site_packages)
    assert notice is not None
    assert '"fatal: not a git repository"' in notice and str(folder) in notice and "harmless" in notice


def test_no_notice_when_git_finds_a_repository(tmp_path, monkeypatch, no_git_dir):
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    assert git_dir_for_lm_eval(CHECKOUT) == str(CHECKOUT / ".git")  # the suite runs from a checkout
    assert git_notice(tmp_path, checkout=CHECKOUT) is None  # lm-eval's call is pointed at the checkout
    assert git_notice(CHECKOUT / "docs", checkout=site_packages) is None  # run inside a work tree
    monkeypatch.setenv("GIT_DIR", str(CHECKOUT / ".git"))
    assert git_notice(tmp_path, checkout=site_packages) is None  # the user's own GIT_DIR
