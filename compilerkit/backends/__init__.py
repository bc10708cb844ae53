"""Backends: one `Target` description and one `Backend` interface (see base.py)."""

from compilerkit.backends.base import Backend, Target, get_backend

__all__ = ["Backend", "Target", "get_backend"]
