# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym integration: the agent's runtime behind `responses_api_agents/prorl_agent`, the
resources-server base of `resources_servers/prorl_*`, and the Gym wire formats.

    config            the agent's settings and where its model is (`resolve_model_access`)
    transport         tools and scoring through a resources server over HTTP
    runtime           pool, handlers, pipeline and service behind `/run`
    result            the Gym verify response `/run` answers
    response          Responses-API output items with token fields
    contract          checks that a result is what NeMo RL expects
    episodes          Gym 0.7 episodes: the failure table, the ledger, the agent's episode routes
    flat_rows         flat rows at the environment server and the answers Gym's collection reads
    collection_keys   the keys of Gym's collection: Gym's public ones, and its private ones restated
    resources_server  the resources-server base class shared by the four domains
    launcher          `prorl gym up/down/status/test` (and `prorl demo`'s stack)
    processes         what a launch starts, recorded so `down` stops exactly that
    stack_state       the launch's record on disk, written before any wait
"""
