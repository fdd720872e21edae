"""Private building blocks of the samplers (may change without notice)."""
