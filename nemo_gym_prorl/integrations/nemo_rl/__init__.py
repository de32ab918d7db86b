"""NeMo RL as data: its recorded config schema and runner rules, and the recipe preflight."""
