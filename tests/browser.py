"""Headless Chromium for report tests (Debian's chromium; installed by `make test`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Appended to a test-only copy of the report (the report itself has no script): after the page loads it
# records how many images decoded and whether any script from the page's data ran.
CHECKER = """<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const ok = images.filter(i => i.complete && i.naturalWidth > 0).length;
  const marker = document.createElement('div');
  marker.id = 'capcal-check';
  marker.textContent = `images ${ok}/${images.length} pwned ${window.__capcal_pwned === undefined ? 0 : 1}`;
  document.body.appendChild(marker);
});
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError(
            "Debian's chromium is not installed (make test installs it: apt-get install chromium)"
        )
    return path


def check_page(html_file: Path, profile: Path) -> tuple[int, int, bool, str]:
    """(images decoded, images, whether injected script ran, page text) of ``html_file`` in Chromium."""
    probe = html_file.with_name(html_file.stem + ".probe.html")
    probe.write_text(html_file.read_text(encoding="utf-8").replace("</body>", CHECKER + "</body>"))
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000"]
    result = subprocess.run(
        command + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120
    )
    match = re.search(r"images (\d+)/(\d+) pwned (\d)", result.stdout)
    if match is None:
        raise AssertionError(f"no check marker in Chromium's DOM dump: {result.stderr[-2000:]}")
    return int(match[1]), int(match[2]), match[3] == "1", result.stdout


def screenshot(html_file: Path, png: Path, profile: Path, height: int = 4000) -> Path:
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size=1280,{height}"]
    subprocess.run(command + [f"--screenshot={png}", html_file.as_uri()], capture_output=True, timeout=120)
    return png


def console_errors(html_file: Path, profile: Path) -> list[str]:
    """Every console message (errors, uncaught exceptions, failed loads) Chromium logs while it loads
    ``html_file``: its ``--enable-logging=stderr`` lines ``...:INFO:CONSOLE:line] "message"`` (logged at INFO
    whatever the message's level; the report has no script, so any message is an error)."""
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    command += [
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        html_file.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "</html>" in result.stdout, result.stderr[-2000:]
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
