# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A shell's output stream split into output and its own prompt markers: a marker is this
shell's only when it opens and closes with its token; anything else is output, byte for byte."""

from __future__ import annotations

import pytest

from nemo_gym_prorl.tools.shell_protocol import MarkerScanner, Prompt


def scan(scanner: MarkerScanner, *chunks: bytes) -> tuple[bytes, list[object]]:
    output = bytearray()
    events: list[object] = []
    for chunk in chunks:
        scanner.scan(chunk, output.extend, lambda: events.append("started"), events.append)
    return bytes(output), events


def test_its_own_markers_are_prompts_and_starts_and_the_rest_is_output() -> None:
    scanner = MarkerScanner("ab12")
    out, events = scan(scanner, b"__PRORL_ab12__:S\r\nhello\n__PRORL_ab12__:3:/work dir:__END_ab12__\r\r\n")
    assert out == b"hello\n"
    assert events == ["started", Prompt(exit_code=3, cwd="/work dir")]


def test_a_marker_split_across_reads_is_held_back_until_it_is_whole() -> None:
    scanner = MarkerScanner("ab12")
    out, events = scan(scanner, b"x__PRORL_ab", b"12__:-1:/w:__EN", b"D_ab12__\n")
    assert (out, events) == (b"x", [Prompt(exit_code=-1, cwd="/w")])


def test_another_shells_marker_is_output() -> None:
    scanner = MarkerScanner("ab12")
    other = b"__PRORL_cd34__:0:/w:__END_cd34__\n"
    out, events = scan(scanner, other, b"__PRORL_ab12__:0:/w:__END_ab12__\n")
    assert (out, events) == (other, [Prompt(exit_code=0, cwd="/w")])


def test_a_cwd_holding_another_tokens_end_is_read_whole() -> None:
    scanner = MarkerScanner("ab12")
    _, events = scan(scanner, b"__PRORL_ab12__:0:/a:__END_cd34__/b:__END_ab12__\n")
    assert events == [Prompt(exit_code=0, cwd="/a:__END_cd34__/b")]


def test_a_token_that_is_not_lowercase_hex_is_refused() -> None:
    with pytest.raises(ValueError, match="lowercase hex"):
        MarkerScanner("a.b")
