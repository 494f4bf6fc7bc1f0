"""tootsie tensors ↔ Hugging Face Llama/Qwen3/Mixtral/Qwen3-MoE tensors, and sharded safetensors files.

tootsie stacks every block's weights on a leading layer axis and stores
matrices as `[in, out]` (`x @ w`); HF stores one tensor per layer as
`[out, in]` (`nn.Linear.weight`). So `.layers.attn.wq[i]` becomes
`model.layers.{i}.self_attn.q_proj.weight` transposed. Both sides rotate the
query/key halves the same way (tootsie's `apply_rope` is HF's `rotate_half`
layout), so no head permutation is needed.

An MoE model's leading `.dense` blocks are HF layers 0..D-1 and its `.layers`
blocks D..L-1. Its router `[hidden, experts]` is the HF gate `[experts,
hidden]`, and expert e of `experts_gate [experts, hidden, inter]` is Mixtral's
`experts.{e}.w1` (Qwen3-MoE's `gate_proj`) `[inter, hidden]`, each transposed
(`EXPERT_TENSORS`).

Files follow the `transformers` convention: one `model.safetensors`, or past
`max_shard_bytes` shards `model-00001-of-0000N.safetensors` with a
`model.safetensors.index.json` mapping every tensor to its shard.

Example: a 2-layer model with QK-norm maps its 14 tootsie tensors to 2 + 2·11 + 1 HF tensors
(no `lm_head.weight` when the embeddings are tied).
"""

import json
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from tootsie.errors import TootsieError
from tootsie.models.registry import ModelConfig
from tootsie.release.hf_config import ARCHITECTURES

BLOCK_TENSORS = {
    "attn.wq": ("self_attn.q_proj.weight", True),
    "attn.wk": ("self_attn.k_proj.weight", True),
    "attn.wv": ("self_attn.v_proj.weight", True),
    "attn.wo": ("self_attn.o_proj.weight", True),
    "attn.q_norm.weight": ("self_attn.q_norm.weight", False),
    "attn.k_norm.weight": ("self_attn.k_norm.weight", False),
    "attn_norm.weight": ("input_layernorm.weight", False),
    "mlp_norm.weight": ("post_attention_layernorm.weight", False),
    "mlp.w_gate": ("mlp.gate_proj.weight", True),
    "mlp.w_up": ("mlp.up_proj.weight", True),
    "mlp.w_down": ("mlp.down_proj.weight", True),
}
"""A block's tootsie tensor (its path inside `.layers.` or `.dense.`) → (HF name inside `model.layers.{i}.`,
transposed?)."""
EXPERT_TENSORS = {
    "mixtral": {
        "mlp.router": ("block_sparse_moe.gate.weight", True),
        "mlp.experts_gate": ("block_sparse_moe.experts.{expert}.w1.weight", True),
        "mlp.experts_up": ("block_sparse_moe.experts.{expert}.w3.weight", True),
        "mlp.experts_down": ("block_sparse_moe.experts.{expert}.w2.weight", True),
    },
    "qwen3_moe": {
        "mlp.router": ("mlp.gate.weight", True),
        "mlp.experts_gate": ("mlp.experts.{expert}.gate_proj.weight", True),
        "mlp.experts_up": ("mlp.experts.{expert}.up_proj.weight", True),
        "mlp.experts_down": ("mlp.experts.{expert}.down_proj.weight", True),
    },
}
"""An MoE block's router and stacked experts → (HF name inside `model.layers.{i}.`, transposed?) per architecture.

`{expert}` names one tensor per expert (the Hub layout, which transformers 5 fuses into `gate_up_proj` on load
and splits again in `save_pretrained`)."""
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

HfLayout = dict[str, tuple[str, tuple[int, ...], bool]]
"""HF tensor name → (tootsie tensor name, index into it: () or (layer,) or (layer, expert), transposed?)."""


def _hf(matrix: np.ndarray, transposed: bool) -> np.ndarray:
    return np.ascontiguousarray(matrix.T if transposed else matrix)


def layer_stacks(config: ModelConfig) -> list[tuple[str, int]]:
    """The stacked-block fields in HF layer order with their block counts: an MoE's dense blocks, then `layers`."""
    dense = getattr(config, "dense_layers", 0)
    return [(".dense", dense)] * bool(dense) + [(".layers", config.num_layers - dense)]


def hf_layout(names: list[str], config: ModelConfig, architecture: str) -> HfLayout:
    """Where each HF tensor of `config` exported as `architecture` comes from, in file order (embeddings,
    layer by layer, norm, head), for a model with tootsie tensors `names`; a tensor without one is an error."""
    layout: HfLayout = {}
    mapped = set()
    block = BLOCK_TENSORS | EXPERT_TENSORS.get(architecture, {})
    if ".embed" in names:
        layout["model.embed_tokens.weight"] = (".embed", (), False)
    layer = 0
    for prefix, count in layer_stacks(config):
        fields = [(f"{prefix}.{field}", hf_name, transposed) for field, (hf_name, transposed) in block.items()]
        fields = [field for field in fields if field[0] in names]
        mapped |= {name for name, _, _ in fields}
        for index in range(count):
            for name, hf_name, transposed in fields:
                where = f"model.layers.{layer + index}.{hf_name}"
                experts = range(config.num_experts) if "{expert}" in hf_name else [None]
                layout |= {
                    where.format(expert=e): (name, (index,) if e is None else (index, e), transposed) for e in experts
                }
        layer += count
    for name in (".final_norm.weight", ".lm_head"):
        if name in names:
            hf_name, transposed = GLOBAL_TENSORS[name]
            layout[hf_name] = (name, (), transposed)
    unknown = sorted(set(names) - mapped - set(GLOBAL_TENSORS))
    if unknown:
        raise TootsieError(
            f"tensors {unknown[:3]} have no Hugging Face {ARCHITECTURES[architecture][0]} counterpart; "
            "this model cannot be exported"
        )
    return layout


def to_hf_tensors(tensors: dict[str, np.ndarray], config: ModelConfig, architecture: str) -> dict[str, np.ndarray]:
    """HF tensors (in file order) of `config` exported as `architecture`, from tootsie's flat checkpoint tensors."""
    layout = hf_layout(list(tensors), config, architecture)
    return {hf_name: _hf(tensors[name][index], transposed) for hf_name, (name, index, transposed) in layout.items()}


def model_layout(config: ModelConfig) -> tuple[list[str], list[jax.ShapeDtypeStruct], jax.tree_util.PyTreeDef]:
    """Tensor names, shapes and tree structure of `config`'s parameters, computed without allocating them."""
    abstract = jax.eval_shape(lambda key: config.build(key=key), jax.random.PRNGKey(0))
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    return (
        [jax.tree_util.keystr(path) for path, _ in leaves_with_paths],
        [leaf for _, leaf in leaves_with_paths],
        treedef,
    )


def from_hf_tensors(
    hf_tensors: dict[str, np.ndarray], config: ModelConfig, architecture: str, source: Path
) -> eqx.Module:
    """The tootsie model whose weights are `hf_tensors` (exported as `architecture`); a missing, extra or
    misshapen tensor is an error naming it."""
    names, shapes, treedef = model_layout(config)
    expected = hf_layout(names, config, architecture)
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
    flat = {name: np.zeros(shape.shape, np.float32) for name, shape in zip(names, shapes)}
    for hf_name, (name, index, transposed) in expected.items():
        value, slot = _hf(np.asarray(hf_tensors[hf_name], dtype=np.float32), transposed), flat[name][index]
        if value.shape != slot.shape:
            raise TootsieError(
                f"{source}: {hf_name} has shape {hf_tensors[hf_name].shape}, "
                f"the config implies {_hf(slot, transposed).shape}"
            )
        flat[name][index] = value
    return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(flat[n], dtype=s.dtype) for n, s in zip(names, shapes)])


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
