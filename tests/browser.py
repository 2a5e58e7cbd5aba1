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


# Appended to a test-only copy of the report: after the page loads it records every heading, paragraph, list
# item, table cell and image whose top lies inside the window (the first screen), with its box and text.
FIRST_SCREEN = """<script>
window.addEventListener('load', () => {
  const height = window.innerHeight;
  const seen = [];
  for (const el of document.querySelectorAll('h1, h2, h3, h4, p, li, th, td, img')) {
    const box = el.getBoundingClientRect();
    if (box.height > 0 && box.top < height) {
      const image = el.tagName === 'IMG';
      seen.push({tag: el.tagName.toLowerCase(), text: image ? el.alt : el.innerText, top: box.top,
                 bottom: box.bottom, loaded: !image || (el.complete && el.naturalWidth > 0)});
    }
  }
  const marker = document.createElement('pre');
  marker.textContent = 'FIRST-SCREEN' + JSON.stringify({width: window.innerWidth, height, seen}) + 'END';
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


def first_screen(html_file: Path, profile: Path, width: int = 1280, height: int = 1000) -> dict:
    """What a reader sees of ``html_file`` in a ``width`` x ``height`` Chromium window before scrolling:
    ``{"width", "height", "seen": [{"tag", "text" (an image's alt), "top", "bottom", "loaded"}, ...]}`` for
    every heading, paragraph, list item, table cell and image whose top lies inside the window, in page
    order."""
    import html
    import json

    probe = html_file.with_name(html_file.stem + ".first-screen.html")
    probe.write_text(html_file.read_text(encoding="utf-8").replace("</body>", FIRST_SCREEN + "</body>"))
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
    command += ["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    match = re.search(r"<pre>FIRST-SCREEN(.*?)END</pre>", result.stdout, re.DOTALL)
    if match is None:
        raise AssertionError(f"no first-screen marker in Chromium's DOM dump: {result.stderr[-2000:]}")
    return json.loads(html.unescape(match[1]))


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
