"""Where the CPU torch comes from: a local wheel folder when one has it, else the PyTorch CPU index."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.llm.embedded import torch_source as ts
from nemo_gym_prorl.llm.embedded.paths import TORCH_REQUIREMENT


@pytest.fixture
def no_pip_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hide this machine's pip configuration so that only what a test sets counts."""
    monkeypatch.setattr(ts, "_pip_config_files", lambda: [])
    for name in ("PRORL_TORCH_FIND_LINKS", "PIP_FIND_LINKS", "PRORL_TORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)


def test_a_matching_wheel_in_a_named_folder_is_used(
    no_pip_config: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")  # CUDA build
    monkeypatch.setenv("PRORL_TORCH_FIND_LINKS", f"/nonexistent:{tmp_path}")
    source = ts.torch_source()
    assert source.local_wheel == wheel and source.index is None
    assert source.install_args() == (str(wheel),)
    assert source.resolve_args() == ("--find-links", str(tmp_path))
    assert "local wheel folder" in source.description


def test_pip_config_find_links_are_searched(
    no_pip_config: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = file://{wheels}\n")
    monkeypatch.setattr(ts, "_pip_config_files", lambda: [conf])
    assert ts.torch_source().local_wheel is not None


def test_without_a_local_wheel_it_says_so_and_uses_the_pytorch_cpu_index(
    no_pip_config: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))  # a folder without the wheel
    source = ts.torch_source()
    assert source.local_wheel is None and source.index == ts.PYTORCH_CPU_INDEX
    assert source.install_args() == ("--index-url", ts.PYTORCH_CPU_INDEX, TORCH_REQUIREMENT)
    assert "--extra-index-url" in source.resolve_args()
    assert source.description.startswith(f"no local {TORCH_REQUIREMENT} wheel")
    assert "PyTorch CPU index" in source.description


def test_the_index_can_be_configured(no_pip_config: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRORL_TORCH_INDEX", "https://mirror.example/whl/cpu")
    assert ts.torch_source().index == "https://mirror.example/whl/cpu"
