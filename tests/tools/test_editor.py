# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The file editor: viewing, creating, replacing, inserting and undoing, confined to the
workspace however the path is spelled."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import Sandbox
from nemo_gym_prorl.tools.editor import Editor, EditorCommand, EditorError


@pytest.fixture
def editor(sandbox: Sandbox) -> Editor:
    # The editor works on the host side of the workspace; the backend does not matter.
    return Editor(sandbox)


@pytest.fixture
def ws(sandbox: Sandbox) -> Path:
    return sandbox.workspace


# -- view ----------------------------------------------------------------------------------------
def test_view_numbers_lines_like_cat_n(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("first\nsecond\nthird\n")
    assert editor.view("a.py") == "     1\tfirst\n     2\tsecond\n     3\tthird"


def test_view_accepts_absolute_paths_under_the_mount(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("x\n")
    assert editor.view("/workspace/a.py") == editor.view("a.py")


def test_view_range_shows_the_requested_lines_and_minus_one_means_to_the_end(
    editor: Editor, ws: Path
) -> None:
    (ws / "a.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    assert editor.view("a.txt", (3, 4)) == "     3\tline3\n     4\tline4"
    assert editor.view("a.txt", (9, -1)) == "     9\tline9\n    10\tline10"


@pytest.mark.parametrize("bad_range", [(0, 2), (11, 12), (5, 3)])
def test_view_range_outside_the_file_is_a_clear_error(
    editor: Editor, ws: Path, bad_range: tuple[int, int]
) -> None:
    (ws / "a.txt").write_text("".join(f"{i}\n" for i in range(10)))
    with pytest.raises(EditorError, match="view_range"):
        editor.view("a.txt", bad_range)


def test_view_of_a_large_file_is_cut_with_a_pointer_to_view_range(sandbox: Sandbox, ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{'x' * 90} {i}\n" for i in range(1000)))
    text = Editor(sandbox, max_view_chars=2000).view("big.txt")
    assert len(text) < 2500
    assert "use `view_range`" in text


def test_view_of_a_directory_lists_two_levels_without_hidden_entries(editor: Editor, ws: Path) -> None:
    (ws / "src" / "pkg" / "deep").mkdir(parents=True)
    (ws / "src" / "pkg" / "deep" / "hidden_by_depth.py").write_text("")
    (ws / "src" / "main.py").write_text("")
    (ws / "README.md").write_text("")
    (ws / ".git").mkdir()
    listing = editor.view("/workspace")
    lines = listing.splitlines()[1:]
    assert lines == ["README.md", "src/", "src/main.py", "src/pkg/"]


def test_view_of_a_binary_file_says_so(editor: Editor, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    assert "binary file" in editor.view("blob.bin")


def test_view_of_a_missing_file_is_an_error(editor: Editor) -> None:
    with pytest.raises(EditorError, match="does not exist"):
        editor.view("nope.txt")


# -- create ----------------------------------------------------------------------------------------
def test_create_writes_the_file_and_its_parent_directories(editor: Editor, ws: Path) -> None:
    message = editor.create("pkg/sub/mod.py", "print('hi')\n")
    assert (ws / "pkg" / "sub" / "mod.py").read_text() == "print('hi')\n"
    assert "Created /workspace/pkg/sub/mod.py" in message


def test_create_over_an_existing_file_overwrites_and_can_be_undone(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("old\n")
    assert "Overwrote" in editor.create("a.txt", "new\n")
    assert (ws / "a.txt").read_text() == "new\n"
    editor.undo_edit("a.txt")
    assert (ws / "a.txt").read_text() == "old\n"


def test_create_keeps_the_mode_of_the_file_it_replaces(editor: Editor, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    editor.create("run.sh", "#!/bin/sh\necho hi\n")
    assert script.stat().st_mode & 0o777 == 0o755


def test_create_on_a_directory_is_an_error(editor: Editor, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(EditorError, match="is a directory"):
        editor.create("d", "x")


# -- str_replace -------------------------------------------------------------------------------------
def test_str_replace_replaces_the_one_occurrence_and_shows_the_result(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    message = editor.str_replace("a.py", "    return 1\n", "    return 2\n")
    assert (ws / "a.py").read_text() == "def f():\n    return 2\n\nprint(f())\n"
    assert "     2\t    return 2" in message


def test_str_replace_with_no_match_is_an_error_that_says_it_must_match_exactly(
    editor: Editor, ws: Path
) -> None:
    (ws / "a.py").write_text("    x = 1\n")
    with pytest.raises(EditorError, match="not found") as err:
        editor.str_replace("a.py", "x = 2", "x = 3")
    assert "exactly" in str(err.value)
    assert (ws / "a.py").read_text() == "    x = 1\n"


def test_str_replace_with_several_matches_lists_their_lines(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\ny = 2\nx = 1\n\nx = 1\n")
    with pytest.raises(EditorError, match=r"occurs 3 times .*lines 1, 3, 5"):
        editor.str_replace("a.py", "x = 1", "x = 9")
    assert (ws / "a.py").read_text() == "x = 1\ny = 2\nx = 1\n\nx = 1\n"


def test_str_replace_with_an_empty_old_str_is_an_error(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("x\n")
    with pytest.raises(EditorError, match="empty"):
        editor.str_replace("a.py", "", "y")


def test_str_replace_with_empty_new_str_deletes(editor: Editor, ws: Path) -> None:
    (ws / "a.py").write_text("keep\ndrop me\nkeep\n")
    editor.str_replace("a.py", "drop me\n", "")
    assert (ws / "a.py").read_text() == "keep\nkeep\n"


def test_str_replace_refuses_binary_and_non_utf8_files(editor: Editor, ws: Path) -> None:
    (ws / "b.bin").write_bytes(b"a\x00b")
    (ws / "latin.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(EditorError, match="binary"):
        editor.str_replace("b.bin", "a", "b")
    with pytest.raises(EditorError, match="UTF-8"):
        editor.str_replace("latin.txt", "caf", "tea")


# -- insert ---------------------------------------------------------------------------------------
def test_insert_puts_text_after_the_given_line(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    editor.insert("a.txt", 1, "one and a half")
    assert (ws / "a.txt").read_text() == "one\none and a half\ntwo\nthree\n"


def test_insert_at_zero_and_at_the_end(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("middle")
    editor.insert("a.txt", 0, "top\n")
    editor.insert("a.txt", 2, "bottom")
    assert (ws / "a.txt").read_text() == "top\nmiddle\nbottom\n"


def test_insert_beyond_the_end_is_an_error(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    with pytest.raises(EditorError, match="outside 0-2"):
        editor.insert("a.txt", 3, "x")


# -- undo ------------------------------------------------------------------------------------------
def test_undo_reverts_edits_one_at_a_time(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("v1\n")
    editor.str_replace("a.txt", "v1", "v2")
    editor.str_replace("a.txt", "v2", "v3")
    editor.undo_edit("a.txt")
    assert (ws / "a.txt").read_text() == "v2\n"
    editor.undo_edit("a.txt")
    assert (ws / "a.txt").read_text() == "v1\n"
    with pytest.raises(EditorError, match="no edit"):
        editor.undo_edit("a.txt")


def test_undo_of_a_create_removes_the_file(editor: Editor, ws: Path) -> None:
    editor.create("new.txt", "x")
    assert "removed" in editor.undo_edit("/workspace/new.txt")
    assert not (ws / "new.txt").exists()


# -- confinement -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["../escape.txt", "sub/../../escape.txt", "/etc/passwd", "/tmp/escape.txt"])
def test_paths_outside_the_workspace_are_refused(editor: Editor, ws: Path, path: str) -> None:
    (ws / "sub").mkdir()
    for attempt in (lambda: editor.create(path, "x"), lambda: editor.view(path)):
        with pytest.raises(EditorError, match="outside the workspace"):
            attempt()
    assert not (ws.parent / "escape.txt").exists()


def test_a_symlink_pointing_out_of_the_workspace_is_refused(editor: Editor, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    (ws / "link.txt").symlink_to(outside)
    (ws / "linkdir").symlink_to(tmp_path)
    with pytest.raises(EditorError, match="outside the workspace"):
        editor.view("link.txt")
    with pytest.raises(EditorError, match="outside the workspace"):
        editor.create("link.txt", "pwned\n")
    with pytest.raises(EditorError, match="outside the workspace"):
        editor.create("linkdir/new.txt", "pwned\n")
    assert outside.read_text() == "secret\n"
    assert not (tmp_path / "new.txt").exists()


def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    editor: Editor, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race a sandboxed process could try: the path checks out, then a directory on it
    # becomes a symlink to the host before the write. The write must fail, not escape.
    (ws / "d").mkdir()
    real_rel = editor._rel

    def check_then_swap(path: str) -> tuple[str, ...]:
        parts = real_rel(path)
        os.rmdir(ws / "d")
        (ws / "d").symlink_to(tmp_path)
        return parts

    monkeypatch.setattr(editor, "_rel", check_then_swap)
    with pytest.raises(EditorError, match="not a directory inside the workspace"):
        editor.create("d/new.txt", "pwned\n")
    assert not (tmp_path / "new.txt").exists()


def test_a_symlink_inside_the_workspace_is_edited_through_to_its_target(editor: Editor, ws: Path) -> None:
    (ws / "real.txt").write_text("a\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    editor.str_replace("alias.txt", "a", "b")
    assert (ws / "real.txt").read_text() == "b\n"
    assert (ws / "alias.txt").is_symlink()


def test_a_hard_link_is_not_written_through(editor: Editor, ws: Path) -> None:
    (ws / "a.txt").write_text("shared\n")
    os.link(ws / "a.txt", ws / "b.txt")
    editor.str_replace("a.txt", "shared", "mine")
    assert (ws / "a.txt").read_text() == "mine\n"
    assert (ws / "b.txt").read_text() == "shared\n"


# -- the command model ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "missing"),
    [
        ({"command": "create", "path": "a"}, "file_text"),
        ({"command": "str_replace", "path": "a"}, "old_str"),
        ({"command": "insert", "path": "a", "new_str": "x"}, "insert_line"),
    ],
)
def test_each_command_requires_its_own_arguments(args: dict[str, str], missing: str) -> None:
    with pytest.raises(ValueError, match=missing):
        EditorCommand.model_validate(args)


def test_run_dispatches_a_validated_command(editor: Editor, ws: Path) -> None:
    editor.run(EditorCommand(command="create", path="x.txt", file_text="1\n"))
    assert editor.run(EditorCommand(command="view", path="x.txt", view_range=[1, -1])) == "     1\t1"
