"""Typed errors of the fine-tuning stack; only ``finetune.train.main`` turns them into exit codes."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is missing, has the wrong type, or names something unknown."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class DataError(ValueError):
    """Session or preference data cannot be turned into training examples."""


class ExportError(RuntimeError):
    """A trained model cannot be written as a transformers folder (e.g. gathered weights that do
    not fit the model's config)."""
