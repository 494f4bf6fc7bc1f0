"""tootsie tensors ↔ Hugging Face Llama/Qwen3 tensors, and sharded safetensors files.

tootsie stacks every block's weights on a leading layer axis and stores
matrices as `[in, out]` (`x @ w`); HF stores one tensor per layer as
`[out, in]` (`nn.Linear.weight`). So `.layers.attn.wq[i]` becomes
`model.layers.{i}.self_attn.q_proj.weight` transposed. Both sides rotate the
query/key halves the same way (tootsie's `apply_rope` is HF's `rotate_half`
layout), so no head permutation is needed.

Files follow the `transformers` convention: one `model.safetensors`, or past
`max_shard_bytes` shards `model-00001-of-0000N.safetensors` with a
`model.safetensors.index.json` mapping every tensor to its shard.

Example: a 2-layer model with QK-norm maps its 14 tootsie tensors to 2 + 2·11 + 1 HF tensors
(no `lm_head.weight` when the embeddings are tied).
"""

import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.models.registry import ModelConfig

LAYER_TENSORS = {
    ".layers.attn.wq": ("self_attn.q_proj.weight", True),
    ".layers.attn.wk": ("self_attn.k_proj.weight", True),
    ".layers.attn.wv": ("self_attn.v_proj.weight", True),
    ".layers.attn.wo": ("self_attn.o_proj.weight", True),
    ".layers.attn.q_norm.weight": ("self_attn.q_norm.weight", False),
    ".layers.attn.k_norm.weight": ("self_attn.k_norm.weight", False),
    ".layers.attn_norm.weight": ("input_layernorm.weight", False),
    ".layers.mlp_norm.weight": ("post_attention_layernorm.weight", False),
    ".layers.mlp.w_gate": ("mlp.gate_proj.weight", True),
    ".layers.mlp.w_up": ("mlp.up_proj.weight", True),
    ".layers.mlp.w_down": ("mlp.down_proj.weight", True),
}
"""Stacked tootsie tensor → (HF name inside `model.layers.{i}.`, transposed?)."""
GLOBAL_TENSORS = {
    ".embed": ("model.embed_tokens.weight", False),
    ".final_norm.weight": ("model.norm.weight", False),
    ".lm_head": ("lm_head.weight", True),
}
"""Unstacked tootsie tensor → (HF name, transposed?)."""
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
IGNORED_HF_SUFFIXES = ("rotary_emb.inv_freq",)
"""Buffers some older HF checkpoints saved; recomputed from the config, so they are skipped on import."""


def _hf(matrix: np.ndarray, transposed: bool) -> np.ndarray:
    return np.ascontiguousarray(matrix.T if transposed else matrix)


def to_hf_tensors(tensors: dict[str, np.ndarray], num_layers: int) -> dict[str, np.ndarray]:
    """HF tensors (in file order: embeddings, layer by layer, norm, head) from tootsie's flat checkpoint tensors."""
    unknown = sorted(set(tensors) - set(LAYER_TENSORS) - set(GLOBAL_TENSORS))
    if unknown:
        raise TootsieError(
            f"tensors {unknown[:3]} have no Hugging Face Llama/Qwen3 counterpart; this model cannot be exported"
        )
    out = {}
    if ".embed" in tensors:
        out["model.embed_tokens.weight"] = _hf(tensors[".embed"], False)
    for i in range(num_layers):
        for name, (hf_name, transposed) in LAYER_TENSORS.items():
            if name in tensors:
                out[f"model.layers.{i}.{hf_name}"] = _hf(tensors[name][i], transposed)
    for name in (".final_norm.weight", ".lm_head"):
        if name in tensors:
            hf_name, transposed = GLOBAL_TENSORS[name]
            out[hf_name] = _hf(tensors[name], transposed)
    return out


def model_layout(config: ModelConfig) -> tuple[list[str], list[jax.ShapeDtypeStruct], jax.tree_util.PyTreeDef]:
    """Tensor names, shapes and tree structure of `config`'s parameters, computed without allocating them."""
    abstract = jax.eval_shape(lambda key: config.build(key=key), jax.random.PRNGKey(0))
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    return (
        [jax.tree_util.keystr(path) for path, _ in leaves_with_paths],
        [leaf for _, leaf in leaves_with_paths],
        treedef,
    )


def _expected_hf_names(names: list[str], num_layers: int) -> dict[str, tuple[str, int | None, bool]]:
    """HF tensor name → (tootsie name, layer index or None, transposed?) for a model with tootsie tensors `names`."""
    expected: dict[str, tuple[str, int | None, bool]] = {}
    for name in names:
        if name in GLOBAL_TENSORS:
            hf_name, transposed = GLOBAL_TENSORS[name]
            expected[hf_name] = (name, None, transposed)
        else:
            hf_name, transposed = LAYER_TENSORS[name]
            expected |= {f"model.layers.{i}.{hf_name}": (name, i, transposed) for i in range(num_layers)}
    return expected


def from_hf_tensors(hf_tensors: dict[str, np.ndarray], config: LlamaConfig, source: Path) -> LlamaModel:
    """The tootsie model whose weights are `hf_tensors`; a missing, extra or misshapen tensor is an error naming it."""
    names, shapes, treedef = model_layout(config)
    expected = _expected_hf_names(names, config.num_layers)
    present = {
        k
        for k in hf_tensors
        if not k.endswith(IGNORED_HF_SUFFIXES) and not (config.tie_embeddings and k == "lm_head.weight")
    }
    missing, unexpected = sorted(set(expected) - present), sorted(present - set(expected))
    if missing or unexpected:
        raise TootsieError(
            f"{source}: tensors do not match the config: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    flat: dict[str, np.ndarray] = {}
    per_layer: dict[str, dict[int, np.ndarray]] = {}
    for hf_name, (name, layer, transposed) in expected.items():
        value = _hf(np.asarray(hf_tensors[hf_name], dtype=np.float32), transposed)
        if layer is None:
            flat[name] = value
        else:
            per_layer.setdefault(name, {})[layer] = value
    flat |= {name: np.stack([layers[i] for i in range(config.num_layers)]) for name, layers in per_layer.items()}
    leaves = []
    for name, shape in zip(names, shapes):
        if flat[name].shape != shape.shape:
            raise TootsieError(
                f"{source}: {name} has shape {flat[name].shape} after conversion, the config implies {shape.shape}"
            )
        leaves.append(jnp.asarray(flat[name], dtype=shape.dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _shards(tensors: dict[str, np.ndarray], max_shard_bytes: int) -> list[list[str]]:
    """Tensor names grouped in file order into shards of at most `max_shard_bytes` (a bigger tensor gets its own)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, value in tensors.items():
        if shards[-1] and size + value.nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += value.nbytes
    return shards


def write_safetensors(tensors: dict[str, np.ndarray], directory: Path, max_shard_bytes: int) -> list[str]:
    """Write `model.safetensors`, or shards plus the index past `max_shard_bytes`; return the file names written."""
    if max_shard_bytes <= 0:
        raise TootsieError(f"max_shard_bytes must be positive, got {max_shard_bytes}")
    shards = _shards(tensors, max_shard_bytes)
    if len(shards) == 1:
        save_file(tensors, str(directory / SINGLE_FILE), metadata={"format": "pt"})
        return [SINGLE_FILE]
    weight_map, files = {}, []
    for index, names in enumerate(shards, start=1):
        file = f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        save_file({name: tensors[name] for name in names}, str(directory / file), metadata={"format": "pt"})
        weight_map |= {name: file for name in names}
        files.append(file)
    index_payload = {"metadata": {"total_size": sum(v.nbytes for v in tensors.values())}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index_payload, indent=2) + "\n", encoding="utf-8")
    return [*files, INDEX_FILE]


def read_safetensors(directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of an HF model directory (single file or sharded with an index), as float32 numpy arrays."""
    index = directory / INDEX_FILE
    if index.is_file():
        files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    elif (directory / SINGLE_FILE).is_file():
        files = [SINGLE_FILE]
    else:
        raise TootsieError(
            f"{directory} has neither {SINGLE_FILE} nor {INDEX_FILE}; point at a Hugging Face model directory"
        )
    tensors = {}
    for file in files:
        if not (directory / file).is_file():
            raise TootsieError(f"{index} names the shard {file}, which is missing from {directory}")
        with safe_open(os.fspath(directory / file), framework="flax") as handle:  # flax: bfloat16 files load too
            tensors |= {name: np.asarray(handle.get_tensor(name), dtype=np.float32) for name in handle.keys()}
    return tensors
