"""Integrations with other libraries: :mod:`headstart.integrations.optuna` (an Optuna sampler)."""
