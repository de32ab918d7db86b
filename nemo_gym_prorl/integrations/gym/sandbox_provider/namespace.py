# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The persistent (namespace) bubblewrap sandbox the provider runs on. It lives in the project's
sandbox layer (`nemo_gym_prorl.sandbox.persistent`, backend `PERSISTENT_BACKEND`), where the
resources servers use it too; this name stays for what imported it from here."""

from nemo_gym_prorl.sandbox.persistent import (
    INIT_ARGV,
    JoinedBubblewrapSandbox,
    JoinTicket,
    NamespaceBubblewrapSandbox,
    PersistentBubblewrapSandbox,
)

__all__ = [
    "INIT_ARGV",
    "JoinTicket",
    "JoinedBubblewrapSandbox",
    "NamespaceBubblewrapSandbox",
    "PersistentBubblewrapSandbox",
]
