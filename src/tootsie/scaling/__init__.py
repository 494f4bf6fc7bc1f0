"""Scaling: isoflop sweep plans, scaling-law fits with intervals, predictions, preregistered records, critical batch size."""
