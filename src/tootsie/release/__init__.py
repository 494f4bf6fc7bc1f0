"""Releases: Hugging Face export and import, model cards, mixture manifests, run histories."""
