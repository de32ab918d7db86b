"""Bridges to the systems around the rollout engine: NeMo Gym (`gym`) and NeMo RL."""
