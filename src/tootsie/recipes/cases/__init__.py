"""The retrospectives' case studies at toy scale, each an experiment with a figure and a verdict."""
