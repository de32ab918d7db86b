# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A confined harness's only way out: loopback TCP in its own network namespace, relayed to
the recording endpoint's Unix socket bound into its sandbox.

A harness speaks HTTP to a base URL (any OpenAI client, `RemoteCommands`). Confined, its network
namespace has loopback alone: no route to the host's loopback, where the model server and the
service listen. The endpoint's socket is the one thing of the host it is given, so this relay,
started inside by the harness's own process, serves `http://127.0.0.1:<port>` there and carries
each connection, byte for byte, to that socket, which serves the rollout doors and nothing else.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit

SOCKET_VARIABLE = "PRORL_DOOR_SOCKET"  # where the endpoint's socket is, inside the sandbox
SOCKET_INSIDE = "/run/prorl/door.sock"
_CHUNK = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class DoorRelay:
    """Loopback TCP to the door's Unix socket, for the life of the process (daemon threads)."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="door-relay", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.socket_path)
        except OSError:
            client.close()
            upstream.close()
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def route(self, url: str) -> str:
        """`url` with its scheme and host:port replaced by this relay's."""
        parts = urlsplit(url)
        return urlunsplit(("http", f"127.0.0.1:{self.port}", parts.path, parts.query, parts.fragment))


def route_request(request: dict[str, object], socket_path: str) -> DoorRelay:
    """Start a relay and point the request's door URLs (the model's and the commands') at it."""
    relay = DoorRelay(socket_path)
    task, commands = request["task"], request["commands"]
    assert isinstance(task, dict) and isinstance(commands, dict)
    task["base_url"] = relay.route(str(task["base_url"]))
    commands["url"] = relay.route(str(commands["url"]))
    return relay
