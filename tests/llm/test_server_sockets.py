# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Each vLLM server started here gets a folder of its own for its ZMQ sockets (vLLM would leave
them in the temp dir), unless the user names one or the temp dir is too deep for socket paths.
That `prorl model serve` removes it at stop is checked on the real server in
`tests/training/test_train_loop.py`; that `gym down` does, in `test_gym_launcher.py`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from nemo_gym_prorl.llm.embedded import private_rpc_dir


def test_a_server_gets_a_new_socket_folder_named_in_its_environment() -> None:
    env: dict[str, str] = {}
    folder = private_rpc_dir(env)
    try:
        assert folder is not None and folder.is_dir() and not any(folder.iterdir())
        assert env == {"VLLM_RPC_BASE_PATH": str(folder)}
        assert folder.parent == Path(tempfile.gettempdir())
    finally:
        if folder is not None:
            shutil.rmtree(folder)


def test_a_folder_the_user_names_is_kept() -> None:
    env = {"VLLM_RPC_BASE_PATH": "/run/user/sockets"}
    assert private_rpc_dir(env) is None
    assert env == {"VLLM_RPC_BASE_PATH": "/run/user/sockets"}


def test_a_temp_dir_too_deep_for_socket_paths_is_left_to_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * max(1, 80 - len(str(tmp_path))))  # 80+ characters
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    env: dict[str, str] = {}
    assert private_rpc_dir(env) is None and env == {}
    assert list(deep.iterdir()) == []
