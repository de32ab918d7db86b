# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A registry maps names to factories and accepts `module:factory` import targets."""

from __future__ import annotations

import pytest

from nemo_gym_prorl.registry import Registry, RegistryError, import_target


def test_a_registered_factory_is_found_and_called_by_name() -> None:
    shapes: Registry[str] = Registry("shape")

    @shapes.register("square")
    def square(side: int) -> str:
        return f"square {side}"

    assert shapes.create("square", 3) == "square 3"
    assert "square" in shapes and shapes.names() == ["square"]


def test_an_unknown_name_says_which_registry_and_what_is_known() -> None:
    shapes: Registry[str] = Registry("shape")
    shapes.register("circle", lambda: "circle")
    with pytest.raises(RegistryError, match=r"unknown shape 'hexagon'.*\['circle'\]"):
        shapes.factory("hexagon")


def test_an_import_target_extends_a_registry_from_configuration() -> None:
    shapes: Registry[str] = Registry("shape")
    assert shapes.create("textwrap:dedent", "  x") == "x"
    assert "textwrap:dedent" in shapes


@pytest.mark.parametrize(
    ("target", "message"),
    [("no_such_module_xyz:f", "cannot import"), ("textwrap:no_such", "not a callable"), ("textwrap", "form")],
)
def test_a_bad_import_target_is_a_clear_error(target: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        import_target(target, "shape")


def test_a_name_cannot_be_taken_twice_by_different_factories() -> None:
    shapes: Registry[str] = Registry("shape")
    shapes.register("a", str)
    shapes.register("a", str)  # the same factory again (a module imported twice) is harmless
    with pytest.raises(RegistryError, match="already registered"):
        shapes.register("a", repr)
    with pytest.raises(RegistryError, match="plain"):
        shapes.register("pkg:thing", str)
