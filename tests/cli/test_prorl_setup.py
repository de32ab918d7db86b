# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl setup` builds the backend and the sandbox runtime side by side, fails if either does,
and returns from an interrupt only once neither is still building (stand-in setups: the real
ones run in `make setup`, before every `make test`)."""

from __future__ import annotations

import argparse
import threading
import time

import pytest

from nemo_gym_prorl.cli import main
from nemo_gym_prorl.cli import model as model_cli
from nemo_gym_prorl.cli import sandbox as sandbox_cli


def test_both_are_built_at_once_and_either_failing_fails_the_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox_started = threading.Event()

    def model_setup(args: argparse.Namespace) -> int:
        assert sandbox_started.wait(timeout=10), "the sandbox runtime was not being built meanwhile"
        return 0

    def sandbox_setup(args: argparse.Namespace) -> int:
        sandbox_started.set()
        return 1

    monkeypatch.setattr(model_cli, "cmd_model_setup", model_setup)
    monkeypatch.setattr(sandbox_cli, "cmd_sandbox_setup", sandbox_setup)
    assert main(["setup"]) == 1


def test_force_reaches_both(monkeypatch: pytest.MonkeyPatch) -> None:
    forced: list[bool] = []
    monkeypatch.setattr(model_cli, "cmd_model_setup", lambda args: forced.append(args.force) or 0)
    monkeypatch.setattr(sandbox_cli, "cmd_sandbox_setup", lambda args: forced.append(args.force) or 0)
    assert main(["setup", "--force"]) == 0
    assert forced == [True, True]


def test_an_interrupt_returns_only_once_the_other_build_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    ended = threading.Event()

    def model_setup(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    def sandbox_setup(args: argparse.Namespace) -> int:
        time.sleep(0.3)  # its child process ending on the same Ctrl-C
        ended.set()
        return 1

    monkeypatch.setattr(model_cli, "cmd_model_setup", model_setup)
    monkeypatch.setattr(sandbox_cli, "cmd_sandbox_setup", sandbox_setup)
    assert main(["setup"]) == 130
    assert ended.is_set()
