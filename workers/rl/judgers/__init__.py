"""Judgers (reward functions). Importable without torch or Ray."""
