# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`python -m nemo_gym_prorl.cli ...` is `prorl ...`."""

import sys

from nemo_gym_prorl.cli.main import main

sys.exit(main())
