"""Layer 5: what the analysis commands compute from the evidence: orderings,
significance, agreement, robustness, baselines."""
