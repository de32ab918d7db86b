# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The syscall filter every sandbox runs under: what it refuses is refused inside, what tasks
use still works, and docs/sandboxes.md lists every entry."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.seccomp import DENIED, compiled_filter

pytestmark = pytest.mark.bwrap

KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine(), 219)  # keyctl(2)'s number
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sandboxes.md"

# Each line: an attempt, run by the sandbox's Python, and the errno name it must end with.
REFUSED = {
    "a new user namespace": ("libc.unshare(0x10000000) and raise_errno()", "EPERM"),
    "a new mount namespace": ("libc.unshare(0x00020000) and raise_errno()", "EPERM"),
    "a mount": ("libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) and raise_errno()", "EPERM"),
    "a kernel keyring": (f"libc.syscall({KEYCTL}, 0, 0, 0, 0, 0) and raise_errno()", "EPERM"),
    "an AF_ALG socket": ("socket.socket(38, socket.SOCK_SEQPACKET)", "EAFNOSUPPORT"),
    "an AF_VSOCK socket": ("socket.socket(40, socket.SOCK_STREAM)", "EAFNOSUPPORT"),
    "a setgid file": ("os.close(os.open('g', os.O_CREAT | os.O_WRONLY, 0o2755))", "EPERM"),
}
_PRELUDE = (
    "import ctypes, errno, os, socket\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def raise_errno():\n"
    "    code = ctypes.get_errno()\n"
    "    raise OSError(code, os.strerror(code))\n"
)


async def test_what_the_filter_refuses_is_refused_inside(tmp_path: Path) -> None:
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        for what, (attempt, expected) in REFUSED.items():
            code = (
                f"{_PRELUDE}try:\n    {attempt}\n    print('ALLOWED')\n"
                "except OSError as exc:\n    print(errno.errorcode[exc.errno])\n"
            )
            result = await sb.exec([sb.python, "-c", code], timeout=30)
            assert result.stdout.strip() == expected, (what, result.stdout, result.stderr)


async def test_what_tasks_use_still_works(tmp_path: Path) -> None:
    """Threads (clone without namespace flags; glibc's clone3 falls back), git, a PTY."""
    script = (
        "python -c 'import threading; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join()' "
        "&& git init -q r && cd r && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m x "
        "&& git log --oneline | wc -l "
        "&& python -c 'import pty, os; pid, fd = pty.fork(); os._exit(0) if pid == 0 else print(\"pty\")'"
    )
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        result = await sb.exec(script, timeout=120)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["thread", "1", "pty"]


def test_the_docs_list_every_entry_with_its_reason() -> None:
    text = DOCS.read_text()
    table = text[text.index("### The syscall filter") :]
    for rule in DENIED:
        name = rule.syscall if isinstance(rule.syscall, str) else "fchmodat2"
        assert re.search(rf"`{re.escape(name)}`", table), f"docs/sandboxes.md does not list {name}"
        assert rule.reason in table, f"docs/sandboxes.md does not give the reason for {name}"
    assert len(compiled_filter()) > 0
