# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bridges to the systems around the rollout engine: NeMo Gym (`gym`) and NeMo RL."""
