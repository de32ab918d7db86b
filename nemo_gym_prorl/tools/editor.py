# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The file editor tool: view, create, str_replace, insert, undo_edit on workspace files.

It works from the host, on the workspace directory, so an edit costs a few system calls rather
than a process inside the sandbox. That makes confinement our job: paths are checked with
`Sandbox.host_path` (no `..`, no absolute path outside, no symlink out) and then opened one
component at a time relative to a directory descriptor, never following a symlink. A process
in the sandbox that swaps a directory for a symlink between the check and the write therefore
makes the edit fail instead of writing outside the workspace (the host side may be root).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxPathError
from nemo_gym_prorl.sandbox.workspace_fs import WorkspacePathError, open_dir

EditorCommandName = Literal["view", "create", "str_replace", "insert", "undo_edit"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SNIPPET_CONTEXT = 4


class EditorError(ValueError):
    """An edit that cannot be done; the message is written for the model to act on."""


class EditorCommand(BaseModel):
    """Arguments of the `editor` tool (one flat object, as the model sends them)."""

    model_config = ConfigDict(extra="forbid")

    command: EditorCommandName = Field(description="What to do; see the tool description.")
    path: str = Field(description="File or directory, absolute under the workspace or relative to it.")
    file_text: str | None = Field(None, description="`create`: the full content of the new file.")
    old_str: str | None = Field(None, description="`str_replace`: exact text to replace (must occur once).")
    new_str: str | None = Field(
        None, description="`str_replace`: replacement text (empty deletes); `insert`: text to insert."
    )
    insert_line: int | None = Field(
        None, ge=0, description="`insert`: insert after this line number (0 = at the top)."
    )
    view_range: list[int] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="`view`: [first, last] line numbers, 1-based, inclusive; last = -1 for the end.",
    )

    @model_validator(mode="after")
    def _required_per_command(self) -> EditorCommand:
        needs = {"create": ["file_text"], "str_replace": ["old_str"], "insert": ["insert_line", "new_str"]}
        missing = [name for name in needs.get(self.command, []) if getattr(self, name) is None]
        if missing:
            raise ValueError(f"`{self.command}` needs {', '.join(f'`{m}`' for m in missing)}")
        return self


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, start=first))


class Editor:
    """File editing confined to one sandbox's workspace, with per-file undo."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        max_view_chars: int = 20_000,
        max_file_bytes: int = 10 * 1024 * 1024,
        max_listing_entries: int = 400,
        undo_depth: int = 10,
    ) -> None:
        self.sandbox = sandbox
        self.max_view_chars = max_view_chars
        self.max_file_bytes = max_file_bytes
        self.max_listing_entries = max_listing_entries
        self.undo_depth = undo_depth
        self._history: dict[str, list[bytes | None]] = {}  # rel path -> earlier contents (None: absent)

    # -- dispatch ---------------------------------------------------------------------------------
    def run(self, cmd: EditorCommand) -> str:
        match cmd.command:
            case "view":
                # Two items, as the schema requires (min_length = max_length = 2).
                lines = (cmd.view_range[0], cmd.view_range[1]) if cmd.view_range else None
                return self.view(cmd.path, lines)
            case "create":
                return self.create(cmd.path, cmd.file_text or "")
            case "str_replace":
                return self.str_replace(cmd.path, cmd.old_str or "", cmd.new_str or "")
            case "insert":
                return self.insert(cmd.path, cmd.insert_line or 0, cmd.new_str or "")
            case _:  # "undo_edit"
                return self.undo_edit(cmd.path)

    # -- paths --------------------------------------------------------------------------------------
    def _rel(self, path: str) -> tuple[str, ...]:
        """Workspace-relative components of `path`, refusing anything that leaves it."""
        if not path or not path.strip():
            raise EditorError("`path` is empty")
        try:
            host = self.sandbox.host_path(path)
        except SandboxPathError as exc:
            raise EditorError(
                f"{exc}; only files under {self.sandbox.spec.workspace_mount} can be edited"
            ) from None
        return host.relative_to(self.sandbox.workspace).parts

    def _shown(self, parts: tuple[str, ...]) -> str:
        return str(PurePosixPath(self.sandbox.spec.workspace_mount, *parts))

    @contextlib.contextmanager
    def _dir(self, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the directory `parts`, opened without following any symlink."""
        try:
            with open_dir(self.sandbox.workspace, parts, create=create) as fd:
                yield fd
        except WorkspacePathError as exc:
            raise EditorError(f"{self._shown(parts)}: {exc.strerror}") from None

    def _stat(self, parts: tuple[str, ...]) -> os.stat_result | None:
        if not parts:
            return os.stat(self.sandbox.workspace)
        try:
            with self._dir(parts[:-1]) as dfd:
                return os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None

    def _read(self, parts: tuple[str, ...]) -> bytes:
        shown = self._shown(parts)
        try:
            with self._dir(parts[:-1]) as dfd:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            raise EditorError(f"{shown} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise EditorError(f"{shown} is a symlink; edit the file it points to instead") from None
            raise EditorError(f"cannot open {shown}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise EditorError(f"{shown} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise EditorError(f"{shown} is not a regular file")
            if st.st_size > self.max_file_bytes:
                raise EditorError(f"{shown} is too large ({st.st_size} bytes > {self.max_file_bytes})")
            return f.read(self.max_file_bytes + 1)

    def _write(self, parts: tuple[str, ...], data: bytes) -> None:
        """Replace the file atomically (a temp file renamed over it), keeping its mode and owner;
        a hard link to it is left untouched rather than written through."""
        with self._dir(parts[:-1], create=True) as dfd:
            name = parts[-1]
            try:
                old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and not stat.S_ISREG(old.st_mode):
                kind = "a directory" if stat.S_ISDIR(old.st_mode) else "not a regular file"
                raise EditorError(f"{self._shown(parts)} is {kind}")
            tmp = f".{name[:200]}.prorl-{secrets.token_hex(4)}.tmp"
            mode = stat.S_IMODE(old.st_mode) if old else 0o644
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
            )
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    if old is not None:
                        with contextlib.suppress(OSError):  # only root may give files away
                            os.fchown(f.fileno(), old.st_uid, old.st_gid)
                        os.fchmod(f.fileno(), mode)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise

    def _unlink(self, parts: tuple[str, ...]) -> None:
        with self._dir(parts[:-1]) as dfd, contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=dfd)

    def _text(self, parts: tuple[str, ...]) -> str:
        data = self._read(parts)
        if b"\x00" in data:
            raise EditorError(f"{self._shown(parts)} is a binary file; it cannot be edited as text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise EditorError(
                f"{self._shown(parts)} is not UTF-8 text; it cannot be edited as text"
            ) from None

    def _remember(self, parts: tuple[str, ...], previous: bytes | None) -> None:
        stack = self._history.setdefault("/".join(parts), [])
        stack.append(previous)
        del stack[: -self.undo_depth]

    # -- commands -----------------------------------------------------------------------------------
    def view(self, path: str, view_range: tuple[int, int] | None = None) -> str:
        parts = self._rel(path)
        st = self._stat(parts)
        if st is None:
            raise EditorError(f"{self._shown(parts)} does not exist")
        if stat.S_ISDIR(st.st_mode):
            if view_range is not None:
                raise EditorError("`view_range` applies to files, not directories")
            return self._listing(parts)
        data = self._read(parts)
        if b"\x00" in data:
            return f"{self._shown(parts)} is a binary file ({len(data)} bytes); it is not shown"
        lines = _split_lines(data.decode("utf-8", errors="replace"))
        first, last = 1, len(lines)
        if view_range is not None:
            first, last = view_range
            if first < 1 or (lines and first > len(lines)) or (not lines and first > 1):
                raise EditorError(f"`view_range` start {first} is outside the file's lines 1-{len(lines)}")
            if last == -1 or last > len(lines):
                last = len(lines)
            elif last < first:
                raise EditorError(f"`view_range` end {last} is before its start {first}")
        if not lines:
            return f"{self._shown(parts)} is empty"
        shown: list[str] = []
        size = 0
        for line in lines[first - 1 : last]:
            size += len(line) + 8
            if size > self.max_view_chars and shown:
                break
            shown.append(line)
        body = _numbered(shown, first)
        end = first + len(shown) - 1
        if end < last:
            body += (
                f"\n[... output cut at {self.max_view_chars} characters: showing lines {first}-{end} of "
                f"{len(lines)}; use `view_range` to see the rest ...]"
            )
        return body

    def _listing(self, parts: tuple[str, ...]) -> str:
        entries: list[str] = []
        cut = False

        def walk(dfd: int, prefix: str, depth: int) -> None:
            nonlocal cut
            for name in sorted(os.listdir(dfd)):
                if name.startswith("."):
                    continue  # hidden files and our own .prorl directory
                if len(entries) >= self.max_listing_entries:
                    cut = True
                    return
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                is_dir = stat.S_ISDIR(st.st_mode)
                entries.append(f"{prefix}{name}{'/' if is_dir else ''}")
                if is_dir and depth < 2:
                    try:
                        sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                    except OSError:
                        continue
                    try:
                        walk(sub, f"{prefix}{name}/", depth + 1)
                    finally:
                        os.close(sub)

        with self._dir(parts) as dfd:
            walk(dfd, "", 1)
        shown = self._shown(parts)
        header = f"Files and directories up to 2 levels deep in {shown} (hidden ones left out):"
        if not entries:
            return f"{header}\n(empty)"
        tail = f"\n[... listing cut at {self.max_listing_entries} entries ...]" if cut else ""
        return header + "\n" + "\n".join(entries) + tail

    def create(self, path: str, file_text: str) -> str:
        parts = self._rel(path)
        if not parts:
            raise EditorError("cannot create the workspace root itself; give a file path")
        st = self._stat(parts)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise EditorError(f"{self._shown(parts)} is a directory")
        previous = self._read(parts) if st is not None else None
        self._write(parts, file_text.encode("utf-8", errors="surrogateescape"))
        self._remember(parts, previous)
        if previous is None:
            return f"Created {self._shown(parts)} ({len(_split_lines(file_text))} lines)."
        return (
            f"Overwrote {self._shown(parts)} ({len(_split_lines(file_text))} lines); `undo_edit` restores it."
        )

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        parts = self._rel(path)
        if old_str == "":
            raise EditorError("`old_str` is empty; give the exact text to replace (use `insert` to add text)")
        content = self._text(parts)
        shown = self._shown(parts)
        count = content.count(old_str)
        if count == 0:
            hint = ""
            if "\r\n" in content and "\r\n" not in old_str and "\n" in old_str:
                hint = " The file uses CRLF line endings."
            elif old_str.strip() and old_str.strip() in content:
                hint = " It does occur with different leading/trailing whitespace."
            raise EditorError(
                f"`old_str` was not found in {shown}; it must match exactly, including whitespace "
                f"and indentation.{hint} View the file to copy the exact text."
            )
        if count > 1:
            starts, pos = [], content.find(old_str)
            while pos != -1:
                starts.append(content.count("\n", 0, pos) + 1)
                pos = content.find(old_str, pos + 1)
            lines = ", ".join(str(n) for n in sorted(set(starts)))
            raise EditorError(
                f"`old_str` occurs {count} times in {shown} (starting on lines {lines}); include more "
                "surrounding lines to make it unique."
            )
        at = content.index(old_str)
        updated = content[:at] + new_str + content[at + len(old_str) :]
        self._write(parts, updated.encode("utf-8"))
        self._remember(parts, content.encode("utf-8"))
        first = content.count("\n", 0, at) + 1
        return f"Edited {shown}. The changed region now reads:\n" + self._snippet(
            updated, first, first + new_str.count("\n")
        )

    def insert(self, path: str, insert_line: int, new_str: str) -> str:
        parts = self._rel(path)
        content = self._text(parts)
        lines = _split_lines(content)
        if not 0 <= insert_line <= len(lines):
            raise EditorError(
                f"`insert_line` {insert_line} is outside 0-{len(lines)} ({self._shown(parts)} has {len(lines)} lines)"
            )
        new_lines = _split_lines(new_str) if new_str else [""]
        updated_lines = lines[:insert_line] + new_lines + lines[insert_line:]
        trailing = "\n" if content.endswith("\n") or insert_line == len(lines) or not content else ""
        updated = "\n".join(updated_lines) + trailing
        self._write(parts, updated.encode("utf-8"))
        self._remember(parts, content.encode("utf-8"))
        return f"Inserted {len(new_lines)} line(s) after line {insert_line} of {self._shown(parts)}:\n" + (
            self._snippet(updated, insert_line + 1, insert_line + len(new_lines))
        )

    def undo_edit(self, path: str) -> str:
        parts = self._rel(path)
        stack = self._history.get("/".join(parts))
        shown = self._shown(parts)
        if not stack:
            raise EditorError(f"no edit of {shown} to undo")
        previous = stack.pop()
        if previous is None:
            self._unlink(parts)
            return f"Undid the creation of {shown}: the file is removed."
        self._write(parts, previous)
        text = previous.decode("utf-8", errors="replace")
        return f"Undid the last edit of {shown}; it now has {len(_split_lines(text))} lines."

    def _snippet(self, text: str, first: int, last: int) -> str:
        lines = _split_lines(text)
        lo = max(1, first - _SNIPPET_CONTEXT)
        hi = min(len(lines), last + _SNIPPET_CONTEXT)
        return _numbered(lines[lo - 1 : hi], lo)
