# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""nemo-gym-prorl: rollout-as-a-service for multi-turn agent RL, as a NeMo Gym plugin."""

__version__ = "0.1.0"
