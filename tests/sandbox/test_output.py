# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Output capture keeps memory bounded and shows both ends of a flood."""

from nemo_gym_prorl.sandbox.output import CappedBuffer, strip_ansi


def test_small_output_is_kept_whole() -> None:
    buf = CappedBuffer(100)
    buf.write(b"hello ")
    buf.write(b"world")
    assert buf.text() == "hello world"
    assert not buf.truncated


def test_flood_keeps_head_and_tail_and_says_how_much_was_dropped() -> None:
    buf = CappedBuffer(20)
    buf.write(b"HEAD-" + b"x" * 10_000 + b"-TAIL")
    text = buf.text()
    assert text.startswith("HEAD-")
    assert text.endswith("-TAIL")
    assert buf.truncated
    assert f"{buf.dropped} bytes of output truncated" in text
    assert len(buf.getvalue()) == 20
    assert buf.total == 10_010


def test_many_small_writes_stay_bounded() -> None:
    buf = CappedBuffer(64)
    for i in range(10_000):
        buf.write(f"{i}\n".encode())
    assert len(buf.getvalue()) == 64
    assert buf.text().endswith("9999\n")


def test_invalid_utf8_is_replaced_not_raised() -> None:
    buf = CappedBuffer(100)
    buf.write(b"\xff\xfe ok")
    assert buf.text().endswith(" ok")


def test_strip_ansi_removes_colours_and_controls_but_keeps_layout() -> None:
    assert strip_ansi("\x1b[31mred\x1b[0m\tx\r\n\x07") == "red\tx\r\n"
    assert strip_ansi("\x1b]0;title\x07plain") == "plain"
