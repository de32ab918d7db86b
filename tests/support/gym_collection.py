# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym 0.7's own rollout collection (`RolloutCollectionHelper.run_from_config`: dispatch,
the failures sidecar, resume) against servers served in process: only its server client is
replaced, by one that posts to the apps over ASGI and answers as Gym's aiohttp client does (a
`ClientResponseError` for an HTTP error, which collection tells from a result)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import orjson
from aiohttp import ClientResponseError, RequestInfo
from multidict import CIMultiDict, CIMultiDictProxy
from nemo_gym.rollout_collection import RolloutCollectionHelper
from omegaconf import DictConfig
from pydantic import PrivateAttr
from yarl import URL


class _Content:
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


class CollectorReply:
    """An aiohttp response, as far as rollout collection reads one."""

    def __init__(self, url: str, response: httpx.Response) -> None:
        self.url, self.status, self.ok = url, response.status_code, response.is_success
        self.content = _Content(response.content)
        self.request_info = RequestInfo(URL(url), "POST", CIMultiDictProxy(CIMultiDict()), URL(url))

    async def read(self) -> bytes:
        return await self.content.read()

    def release(self) -> None:
        pass

    def raise_for_status(self) -> None:
        if not self.ok:
            raise ClientResponseError(self.request_info, (), status=self.status, message="HTTP error")


class CollectorClient:
    """Gym's server client for collection: `servers` maps a server name to its app's client."""

    def __init__(self, global_config_dict: DictConfig, servers: Mapping[str, httpx.AsyncClient]) -> None:
        self.global_config_dict = global_config_dict
        self.servers = dict(servers)
        self.posts: list[tuple[str, str, Any]] = []

    async def post(self, server_name: str, url_path: str, json: Any = None, **_: Any) -> CollectorReply:
        self.posts.append((server_name, url_path, json))
        body = orjson.loads(orjson.dumps(json))  # what goes over the wire
        reply = await self.servers[server_name].post(url_path, json=body, timeout=60)
        return CollectorReply(f"http://{server_name}{url_path}", reply)

    def runs(self) -> list[Any]:
        """The bodies collection posted to `/run`, in order."""
        return [body for _, path, body in self.posts if path == "/run"]


class InProcessCollection(RolloutCollectionHelper):
    """Gym's collection helper, whose server client is `client`."""

    _client: CollectorClient = PrivateAttr()

    def __init__(self, client: CollectorClient) -> None:
        super().__init__()
        self._client = client

    def setup_server_client(self, head_server_config: Any = None) -> CollectorClient:  # type: ignore[override]
        return self._client
