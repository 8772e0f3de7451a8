"""Reinjectors: rebuild the working surface after a compact boundary."""
