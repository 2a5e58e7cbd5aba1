"""The files of a prepared model folder: the name of capcal's manifest in it, and a file's sha256.

Shared by ``prepare`` (which writes the manifest and checks a GGUF's sha256) and ``model_identity`` (which
leaves the manifest out of a checkpoint's fingerprint and hashes every other file).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["MANIFEST_NAME", "file_sha256"]

MANIFEST_NAME = "capcal_model.json"  # written by ``capcal models prepare`` beside the checkpoint's files
_CHUNK = 1 << 22


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file's bytes (uncached; ``checkpoint_fingerprint`` keeps its own cache)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
