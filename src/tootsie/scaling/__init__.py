"""Scaling: isoflop sweep plans, scaling-law fits with intervals, predictions, preregistrations, critical batch size."""
