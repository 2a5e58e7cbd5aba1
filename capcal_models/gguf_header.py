"""What a GGUF file says it is: its header (architecture, tensor count, model name, layer count).

capcal prepares models from GGUF files that third parties split across PyPI packages; such a package is
untrusted data. Before a file is converted, ``check_gguf_header`` compares what its header declares with what
the model's entry in ``capcal_models.prepare.MODELS`` expects, and refuses it in one line when they differ.
The header is read with the ``gguf`` package's reader (the GGUF format of llama.cpp: magic ``GGUF``, version,
tensor count, key-value metadata such as ``general.architecture`` and ``<architecture>.block_count``); nothing
in the file or the packages is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["GGUFHeader", "GGUFHeaderMismatch", "check_gguf_header", "read_gguf_header"]


class GGUFHeaderMismatch(RuntimeError):
    """A GGUF file that is not what it should be (or not a GGUF file at all)."""


@dataclass(frozen=True)
class GGUFHeader:
    """The header fields capcal checks: ``general.architecture``, the tensor count, ``general.name`` (None
    when absent) and ``<architecture>.block_count`` (None when absent)."""

    architecture: str
    tensor_count: int
    name: str | None
    block_count: int | None

    def describe(self) -> str:
        """One phrase, e.g. ``qwen2 "Qwen2.5 Coder 0.5B Instruct AWQ" with 291 tensors and 24 blocks``."""
        name = f' "{self.name}"' if self.name else ""
        blocks = f" and {self.block_count} blocks" if self.block_count is not None else ""
        return f"{self.architecture}{name} with {self.tensor_count} tensors{blocks}"


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """The header of the GGUF file ``path``; ``GGUFHeaderMismatch`` when it is not a readable GGUF file."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
        fields = reader.fields
        architecture = str(fields["general.architecture"].contents())
        name = fields["general.name"].contents() if "general.name" in fields else None
        block_key = f"{architecture}.block_count"
        blocks = fields[block_key].contents() if block_key in fields else None
        return GGUFHeader(architecture, len(reader.tensors), None if name is None else str(name),
                          None if blocks is None else int(blocks))  # fmt: skip
    except Exception as error:  # the reader meets untrusted bytes: any failure means "not readable"
        raise GGUFHeaderMismatch(
            f"{path}: not a readable GGUF file ({type(error).__name__}: {error})"
        ) from error


def check_gguf_header(
    header: GGUFHeader,
    *,
    architecture: str,
    tensor_count: int,
    name: str | None = None,
    block_count: int | None = None,
    source: str = "the GGUF file",
) -> None:
    """Raise ``GGUFHeaderMismatch`` (one line naming ``source``) unless ``header`` declares the expected
    architecture and tensor count, and ``name`` and ``block_count`` where they are given."""
    expected = GGUFHeader(architecture, tensor_count, name if name is not None else header.name,
                          block_count if block_count is not None else header.block_count)  # fmt: skip
    if header != expected:
        raise GGUFHeaderMismatch(
            f"{source} holds a GGUF of {header.describe()}, not the expected {expected.describe()}: refusing "
            "to convert it (a changed or mislabelled package)"
        )
