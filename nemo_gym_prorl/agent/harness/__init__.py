# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Agent harnesses people deploy (mini-swe-agent, tool-calling SDKs) as a rollout's agent: their
model calls go through the recording endpoint, token-exact, and their commands into the
rollout's sandbox."""
