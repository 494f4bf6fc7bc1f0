"""Microannealing: short anneals per candidate data source, ranked against a control."""
