"""Decoder-only transformers as Equinox modules (Llama style, optional Qwen3 QK-norm), chosen through `MODELS`.

Importing any module of this package registers the model kinds, so every config
file and `to_plain` agrees that a model config is written `{kind: llama, ...}`.
"""

from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.models.registry import MODELS, ModelChoice

__all__ = ["MODELS", "LlamaConfig", "LlamaModel", "ModelChoice"]
