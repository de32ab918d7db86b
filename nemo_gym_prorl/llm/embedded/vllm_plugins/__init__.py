# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Modules a vLLM server the project starts imports by name (this folder is put on its
PYTHONPATH): they run in vLLM's own interpreter and venv, so they use the standard library only."""
