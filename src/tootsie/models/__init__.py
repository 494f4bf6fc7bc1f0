"""Decoder-only transformers as Equinox modules (Llama style, optional Qwen3 QK-norm)."""

from tootsie.models.llama import LlamaConfig, LlamaModel

__all__ = ["LlamaConfig", "LlamaModel"]
