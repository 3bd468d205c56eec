"""Layer 6: presenting results: the report, its plots, explanations."""
