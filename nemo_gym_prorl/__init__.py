"""nemo-gym-prorl: rollout-as-a-service for multi-turn agent RL, as a NeMo Gym plugin."""

__version__ = "0.1.0"
