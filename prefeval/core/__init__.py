"""Layer 1: judgments, positions, ties, moments, the preference cube, errors, progress and
system limits. Imports nothing else of prefeval."""
