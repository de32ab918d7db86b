# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train` records the command line that reruns it: its config and its overrides."""

from __future__ import annotations

import argparse

from nemo_gym_prorl.cli.train import train_command


def test_the_recorded_command_names_the_config_and_every_override() -> None:
    args = argparse.Namespace(
        config="harness_swe", overrides=["grpo.steps=4", "evaluation.phases=[sft, grpo]"]
    )
    assert (
        train_command(args) == "prorl train --config harness_swe grpo.steps=4 'evaluation.phases=[sft, grpo]'"
    )


def test_the_default_config_is_the_bare_command() -> None:
    assert train_command(argparse.Namespace(config="default", overrides=[])) == "prorl train"
