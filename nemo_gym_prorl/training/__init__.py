# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Trainer-agnostic training support: the seed split of training and held-out tasks
(`heldout`) and the program-written demonstrations of the cold start (`demonstrations`).

Layer: beside `integrations` (it may use agent, tasks, tools, sandbox, llm, datasets; never the
service's internals or the CLI). `prorl train` calls `demonstrations.write_demonstrations` and
draws its RL and evaluation rows from `heldout.SeedSplit`.
"""
