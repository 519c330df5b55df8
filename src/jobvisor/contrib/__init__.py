"""Integrations with application frameworks; each needs its framework installed."""
