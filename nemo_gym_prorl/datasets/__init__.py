# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Datasets -> NeMo Gym rows: the one place that turns task data into rows for every domain.

`rows`: the row builder and JSONL files; `sources`: the offline sources (HumanEval,
reasoning-gym, NeMo Gym's example files); `swe`: SWE-bench-format instances. A converter for a
new dataset is a module here that yields rows through `rows.make_row`.
"""
