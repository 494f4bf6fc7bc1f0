"""The Hugging Face `config.json` of a tootsie model, and back.

Export dispatches on the model kind (`tootsie.models.registry`): the kinds in
`EXPORTED_KINDS` map to a Hugging Face class, any other is refused by name.
tootsie's `llama` decoder is Llama's (RMSNorm, half-rotation RoPE with optional Llama 3
scaling, grouped-query attention, SwiGLU, no biases); with `qk_norm` it is
Qwen3's. A checkpoint therefore exports as `LlamaForCausalLM` or
`Qwen3ForCausalLM` with the field renames of `FIELD_NAMES`, and anything the
chosen class cannot express is refused with the feature named, instead of being
exported into a model that computes something else.

The `moe` decoder is Mixtral's (`MixtralForCausalLM`) without QK-norm and
Qwen3-MoE's (`Qwen3MoeForCausalLM`) with it: both route each token to the top
k of a softmax over experts, dropless at inference as tootsie's inference is.
`router_weights` is Qwen3-MoE's `norm_topk_prob` (Mixtral always renormalizes)
and the leading dense blocks are its `mlp_only_layers`. Neither class has
shared experts, and Mixtral has no dense blocks (`moe_refusals`). The capacity
factor and the router loss weights shape training only, so they export as they
are (the loss weight as transformers' `router_aux_loss_coef`).

Example: `LlamaConfig(hidden_dim=128, num_heads=4, qk_norm=True)` exports as
`{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 128, "head_dim": 32, ...}`.
"""

import dataclasses

from tootsie.configfile import KIND_KEY, to_plain
from tootsie.errors import TootsieError
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.models.registry import MODELS, ModelConfig, model_kind, recorded_model, require_kind

EXPORTED_KINDS = ("llama", "moe")
"""Model kinds with a Hugging Face counterpart (`tootsie.models.registry`); the others cannot be exported."""
ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
    "mixtral": ("MixtralForCausalLM", "mixtral"),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
}
"""Export name → (HF architecture class, HF model_type)."""
KIND_ARCHITECTURES = {"llama": ("llama", "qwen3"), "moe": ("mixtral", "qwen3_moe")}
"""Model kind → its export names (without QK-norm, with QK-norm)."""
FIELD_NAMES = {
    "vocab_size": "vocab_size",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "norm_eps": "rms_norm_eps",
    "tie_embeddings": "tie_word_embeddings",
    "initializer_std": "initializer_range",
    "rope_theta": "rope_theta",
}
"""tootsie `LlamaConfig` field → HF config key, for fields that are a plain rename."""
HANDLED_FIELDS = frozenset(FIELD_NAMES) | {"head_dim", "rope_scaling", "qk_norm", "remat", "attention"}
"""Fields the export maps (`remat` and the `attention` kernel change how the model is computed, not what)."""
MOE_FIELDS = frozenset(
    {
        "num_experts",
        "experts_per_token",
        "num_shared_experts",
        "dense_layers",
        "dense_intermediate_dim",
        "router_weights",
        "capacity_factor",
        "load_balancing_weight",
        "router_z_loss_weight",
        "expert_backend",
    }
)
"""`MoeConfig` fields the export maps or refuses by name (`moe_refusals`); the capacity factor, the router loss
weights and the expert backend shape training or how experts are computed, not the inference function."""
FIXED_HF_VALUES = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "use_sliding_window": False}
"""HF settings tootsie's decoder always has; an import with another value is refused."""
FIXED_KEYS = {
    "llama": ("hidden_act", "attention_bias", "mlp_bias"),
    "qwen3": ("hidden_act", "attention_bias", "use_sliding_window"),
    "mixtral": ("hidden_act",),
    "qwen3_moe": ("hidden_act", "attention_bias", "use_sliding_window"),
}
"""The `FIXED_HF_VALUES` keys each architecture's config has (Mixtral's attention never has biases)."""


def check_expressible(model: dict[str, object], where: str) -> None:
    """Refuse a recorded model config of a kind HF export does not handle, or with a feature it does not map.

    A feature is a field at a non-default value.
    """
    kind = recorded_model(model)[KIND_KEY]
    require_kind(kind, EXPORTED_KINDS, f"Hugging Face export of {where}")
    handled = HANDLED_FIELDS | (MOE_FIELDS if kind == "moe" else frozenset())
    defaults = {
        f.name: to_plain(f.default) for f in dataclasses.fields(MODELS[kind]) if f.default is not dataclasses.MISSING
    }
    classes = " or ".join(ARCHITECTURES[name][0] for name in KIND_ARCHITECTURES[kind])
    for name, value in model.items():
        if name in handled or name == KIND_KEY or (name in defaults and value == defaults[name]):
            continue
        raise TootsieError(
            f"{where}: the model feature {name}={value!r} has no equivalent in Hugging Face "
            f"{classes}; only {', '.join(sorted(handled))} "
            f"can be exported (train without {name} to release in HF format)"
        )


def moe_refusals(config: MoeConfig, architecture: str) -> None:
    """Refuse an MoE feature that `architecture` (mixtral or qwen3_moe) cannot express, naming the field."""
    class_name = ARCHITECTURES[architecture][0]
    if config.num_shared_experts:
        raise TootsieError(
            f"num_shared_experts: {class_name} has no always-on shared experts, and this model has "
            f"{config.num_shared_experts}; train with num_shared_experts: 0 to release in HF format"
        )
    if architecture == "mixtral" and config.dense_layers:
        raise TootsieError(
            f"dense_layers: MixtralForCausalLM has experts in every layer, and this model's first "
            f"{config.dense_layers} are dense; turn on qk_norm and export as qwen3_moe (its mlp_only_layers), "
            "or train with dense_layers: 0"
        )
    if architecture == "mixtral" and config.router_weights != "renormalized":
        raise TootsieError(
            f"router_weights: MixtralForCausalLM always renormalizes the top-k router weights, and this model's "
            f"are {config.router_weights!r}; Qwen3MoeForCausalLM expresses it (norm_topk_prob: false) with qk_norm"
        )


def choose_architecture(config: ModelConfig, requested: str | None) -> str:
    """The export architecture: llama or qwen3 for a `llama` model, mixtral or qwen3_moe for an `moe` one,
    the second exactly when QK-norm is on.

    A model kind outside `EXPORTED_KINDS`, or a request that cannot express the model, is an error naming why.
    """
    kind = model_kind(config)
    require_kind(kind, EXPORTED_KINDS, "Hugging Face export")
    if requested is not None and requested not in ARCHITECTURES:
        raise TootsieError(f"unknown architecture {requested!r}; choose one of {sorted(ARCHITECTURES)}")
    plain, normed = KIND_ARCHITECTURES[kind]
    if requested is not None and requested not in (plain, normed):
        raise TootsieError(
            f"architecture {requested!r} cannot express a {kind!r} model; export it as {plain} or {normed}"
        )
    architecture = requested or (normed if config.qk_norm else plain)
    class_name = ARCHITECTURES[architecture][0]
    if architecture == plain and config.qk_norm:
        raise TootsieError(
            f"qk_norm: {class_name} has no per-head query/key RMSNorm, so "
            f"this QK-norm model cannot be exported as {plain}; export it as {normed}"
        )
    if architecture == normed and not config.qk_norm:
        raise TootsieError(
            f"qk_norm: {class_name} always normalizes queries and keys per "
            f"head and this model does not (qk_norm is off); export it as {plain}"
        )
    if architecture == "llama" and config.hidden_dim % config.num_heads:
        raise TootsieError(
            "head_dim: transformers' LlamaConfig requires hidden_size divisible by num_attention_heads, "
            f"but this model has hidden_dim={config.hidden_dim}, num_heads={config.num_heads}, "
            f"head_dim={config.head_dim}; LlamaForCausalLM cannot express it"
        )
    if isinstance(config, MoeConfig):
        moe_refusals(config, architecture)
    return architecture


def moe_hf_config(config: MoeConfig, architecture: str) -> dict[str, object]:
    """The `config.json` keys of an MoE export beyond the Llama ones (experts, k, router; Qwen3-MoE's dense layers).

    transformers' load-balancing loss sums over the k choices, so at the same loads it is k times tootsie's
    Switch form: `router_aux_loss_coef` is `load_balancing_weight / k` (used only when fine-tuning with it on).
    """
    common = {
        "num_experts_per_tok": config.experts_per_token,
        "router_aux_loss_coef": config.load_balancing_weight / config.experts_per_token,
        "output_router_logits": False,
        "sliding_window": None,
    }
    if architecture == "mixtral":
        return common | {"num_local_experts": config.num_experts, "router_jitter_noise": 0.0}
    return common | {
        "num_experts": config.num_experts,
        "moe_intermediate_size": config.intermediate_dim,
        "intermediate_size": config.dense_width,
        "norm_topk_prob": config.router_weights == "renormalized",
        "decoder_sparse_step": 1,
        "mlp_only_layers": list(range(config.dense_layers)),
    }


def hf_config(
    config: LlamaConfig, architecture: str, bos_id: int, eos_id: int, max_position_embeddings: int
) -> dict[str, object]:
    """The `config.json` contents for `config` exported as `architecture`."""
    class_name, model_type = ARCHITECTURES[architecture]
    payload: dict[str, object] = {"architectures": [class_name], "model_type": model_type}
    payload |= {hf_key: getattr(config, field) for field, hf_key in FIELD_NAMES.items()}
    payload |= {key: FIXED_HF_VALUES[key] for key in FIXED_KEYS[architecture]}
    payload |= {
        "head_dim": config.resolved_head_dim,
        "max_position_embeddings": max_position_embeddings,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "use_cache": True,
    }
    if config.rope_scaling is not None:
        scaling = config.rope_scaling
        payload["rope_scaling"] = {
            "rope_type": "llama3",
            "factor": scaling.factor,
            "low_freq_factor": scaling.low_freq_factor,
            "high_freq_factor": scaling.high_freq_factor,
            "original_max_position_embeddings": scaling.original_max_position,
        }
    if isinstance(config, MoeConfig):
        payload |= moe_hf_config(config, architecture)
    return payload


def _rope(hf: dict[str, object], where: str) -> tuple[float, Llama3RopeScaling | None]:
    """RoPE theta and scaling from the transformers 4 (`rope_theta`, `rope_scaling`) or 5 (`rope_parameters`) keys."""
    params = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise TootsieError(
            f"{where}: rope_parameters {params!r} is not one mapping (per-layer RoPE has no tootsie equivalent)"
        )
    theta = float(params.get("rope_theta", hf.get("rope_theta", 10_000.0)))
    if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
        raise TootsieError(
            f"{where}: partial_rotary_factor={params['partial_rotary_factor']} (partial RoPE) has no tootsie equivalent"
        )
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return theta, None
    if rope_type != "llama3":
        raise TootsieError(
            f"{where}: rope_type {rope_type!r} has no tootsie equivalent; tootsie supports default and llama3 RoPE"
        )
    scaling = Llama3RopeScaling(
        factor=float(params["factor"]),
        low_freq_factor=float(params["low_freq_factor"]),
        high_freq_factor=float(params["high_freq_factor"]),
        original_max_position=int(params["original_max_position_embeddings"]),
    )
    return theta, scaling


def moe_fields_from_hf(hf: dict[str, object], architecture: str, where: str) -> dict[str, object]:
    """The `MoeConfig` fields of a Mixtral or Qwen3-MoE `config.json` (the inverse of `moe_hf_config`).

    Imported models train dropless (`capacity_factor: null`), as transformers computes them; dense layers that
    are not the leading ones, and Mixtral's sliding window, have no tootsie equivalent and are refused.
    """
    k = int(hf["num_experts_per_tok"])
    fields: dict[str, object] = {
        "experts_per_token": k,
        "capacity_factor": None,
        "load_balancing_weight": float(hf.get("router_aux_loss_coef", 0.001)) * k,
    }
    if architecture == "mixtral":
        if hf.get("sliding_window") is not None:
            raise TootsieError(f"{where}: sliding_window={hf['sliding_window']} has no tootsie equivalent")
        return fields | {"num_experts": hf["num_local_experts"]}
    dense = list(hf.get("mlp_only_layers") or [])
    if dense != list(range(len(dense))) or hf.get("decoder_sparse_step", 1) != 1:
        raise TootsieError(
            f"{where}: mlp_only_layers={dense}, decoder_sparse_step={hf.get('decoder_sparse_step', 1)}: tootsie's "
            "dense layers are the leading ones only (mlp_only_layers [0, ..., D-1], decoder_sparse_step 1)"
        )
    experts = hf.get("num_experts") or hf["num_local_experts"]  # transformers 5 saves its attribute_map name
    width = int(hf["moe_intermediate_size"])
    dense_width = int(hf["intermediate_size"]) if dense and hf["intermediate_size"] != k * width else None
    return fields | {
        "num_experts": experts,
        "intermediate_dim": width,
        "dense_layers": len(dense),
        "dense_intermediate_dim": dense_width,
        "router_weights": "renormalized" if hf.get("norm_topk_prob", False) else "softmax",
    }


def model_config_from_hf(hf: dict[str, object], where: str) -> tuple[LlamaConfig, str]:
    """The tootsie config (a `LlamaConfig`, or a `MoeConfig` for Mixtral and Qwen3-MoE) and architecture name
    of an HF `config.json`.

    Other architectures or settings are refused by name.
    """
    classes = {class_name: name for name, (class_name, _) in ARCHITECTURES.items()}
    found = hf.get("architectures") or []
    if not isinstance(found, list) or len(found) != 1 or found[0] not in classes:
        raise TootsieError(f"{where}: architectures {found!r} cannot be imported; tootsie reads {sorted(classes)}")
    architecture = classes[found[0]]
    for key, expected in FIXED_HF_VALUES.items():
        if hf.get(key, expected) != expected:
            raise TootsieError(
                f"{where}: {key}={hf[key]!r} has no tootsie equivalent (tootsie's decoder has {key}={expected!r})"
            )
    theta, scaling = _rope(hf, where)
    fields = {field: hf[hf_key] for field, hf_key in FIELD_NAMES.items() if hf_key in hf and hf_key != "rope_theta"}
    try:
        fields["num_kv_heads"] = hf.get("num_key_value_heads") or hf["num_attention_heads"]
        head_dim = hf.get("head_dim")
        if head_dim is not None and head_dim * hf["num_attention_heads"] == hf["hidden_size"]:
            head_dim = None  # the default width: keep the config identical to the one exported
        qk_norm = architecture in ("qwen3", "qwen3_moe")
        common = fields | {"head_dim": head_dim, "rope_theta": theta, "rope_scaling": scaling, "qk_norm": qk_norm}
        if architecture in KIND_ARCHITECTURES["moe"]:
            config: LlamaConfig = MoeConfig(**(common | moe_fields_from_hf(hf, architecture, where)))
        else:
            config = LlamaConfig(**common)
    except KeyError as error:
        raise TootsieError(f"{where}: required key {error} is missing") from None
    except (TypeError, ValueError) as error:
        raise TootsieError(f"{where}: {error}") from None
    return config, architecture
