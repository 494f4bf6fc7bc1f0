"""The tiny scale: the recipes' phase structure and local stand-in data, trained for real on a CPU."""
