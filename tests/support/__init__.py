"""Test support: scripted models and scripted rollout handlers. Never imported by the product package."""
