"""A chat model exported to `transformers`: the same chat-template ids, and greedy generation stops at the same place.

The tokenizer is the Llama 3-style one of the datakit tests with ChatML's
`<|im_start|>`/`<|im_end|>` added as specials, so both built-in templates'
end-of-turn markers are single tokens (as in Llama 3 Instruct and Qwen). The
model that must stop is trained here for real (tootsie's trainer, a ChatML chat
cache, loss on assistant tokens) until it ends its replies with `<|im_end|>`;
the export and `tootsie generate` find the template through the run's cache
ledger, with no flag.
"""

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.datakit.llama3_tokenizer import build_llama3_tokenizer
from tests.release.conftest import make_checkpoint, random_params
from tootsie.cli.main import main
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.sequences import WholeDocumentsConfig
from tootsie.datakit.chat_templates import CHAT_TEMPLATES
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenize import ChatTokenizeConfig, tokenize_chat
from tootsie.eval.text_generation import TextGenerator
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.release.hf_chat import FROM_FLAG, FROM_RUN
from tootsie.release.hf_export import export_hf
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

torch = pytest.importorskip(
    "torch", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
)
transformers = pytest.importorskip(
    "transformers", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
)

MODEL = LlamaConfig(
    vocab_size=416, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, attention="xla"
)
WORDS = ["apple", "river", "stone", "cloud", "green", "music", "table", "light"]
STEPS = 60
"""SFT steps: at 60 (lr 1e-2) every training prompt gets its exact reply and <|im_end|>; at 30 some run on."""
MAX_NEW_TOKENS = 16
CONVERSATION = [
    {"role": "system", "content": "Repeat the word."},
    {"role": "user", "content": "Say café twice."},
    {"role": "assistant", "content": "café café"},
    {"role": "user", "content": "Now handler_3?"},
    {"role": "assistant", "content": "handler_3"},
]


@pytest.fixture(scope="module")
def chat_tokenizer(tmp_path_factory) -> Path:
    """The Llama 3-style tokenizer plus ChatML's markers as special tokens (BOS/EOS named in tokenizer_config)."""
    path = build_llama3_tokenizer(tmp_path_factory.mktemp("chat-tokenizer"))
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tokenizer.save(str(path))
    return path


def _hf_tokenizer(export: Path) -> "transformers.PreTrainedTokenizerBase":
    return transformers.AutoTokenizer.from_pretrained(str(export), local_files_only=True)


def _ids(encoded: object) -> list[int]:
    """apply_chat_template's ids (a list, or a BatchEncoding in newer transformers)."""
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


@pytest.mark.parametrize(("template", "end_of_turn"), [("chatml", "<|im_end|>"), ("llama3", "<|eot_id|>")])
def test_apply_chat_template_gives_tootsies_ids(tmp_path, chat_tokenizer, capsys, template, end_of_turn) -> None:
    conversations = tmp_path / "chat.jsonl"
    conversations.write_text(json.dumps({"messages": CONVERSATION}) + "\n", encoding="utf-8")
    tokenize_chat(
        ChatTokenizeConfig(input=str(conversations), tokenizer=str(chat_tokenizer), chat_template=template),
        str(tmp_path / "cache"),
    )
    cached = open_token_cache(tmp_path / "cache").document(0).tolist()
    checkpoint = make_checkpoint(tmp_path / "run", MODEL)
    export = ["export", "hf", str(checkpoint), "--out", str(tmp_path / "hf"), "--tokenizer", str(chat_tokenizer)]
    capsys.readouterr()
    assert main([*export, "--chat-template", template, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    hf = _hf_tokenizer(tmp_path / "hf")
    turn_id = hf.convert_tokens_to_ids(end_of_turn)
    assert (
        json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())["chat_template"]
        == (CHAT_TEMPLATES[template])
    )
    assert json.loads((tmp_path / "hf" / "generation_config.json").read_text())["eos_token_id"] == [
        hf.eos_token_id,
        turn_id,
    ]
    assert summary["chat_template"]["origin"] == FROM_FLAG
    assert summary["chat_template"]["end_of_turn_token_id"] == turn_id and summary["eos_token_id"] == [
        hf.eos_token_id,
        turn_id,
    ]
    # the whole conversation: what SFT trained on
    assert _ids(hf.apply_chat_template(CONVERSATION, tokenize=True)) == cached
    # the generation prompt: what tootsie generate --chat feeds the model
    prompt = CONVERSATION[:4]
    generator = TextGenerator.load(random_params(MODEL, 0), chat_tokenizer, template)
    ours = generator.encode_chat(prompt)
    assert _ids(hf.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)) == ours
    assert cached[: len(ours)] == ours and cached[len(ours) :].count(turn_id) == 1


def _train_chat_model(tmp_path: Path, tokenizer: Path) -> Path:
    """A tiny model SFT-trained to answer "Say W." with "W W" and end the turn: tootsie's trainer, ChatML cache."""
    lines = [
        json.dumps(
            {"messages": [{"role": "user", "content": f"Say {w}."}, {"role": "assistant", "content": f"{w} {w}"}]}
        )
        for w in WORDS
    ]
    (tmp_path / "chat.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cache = str(tmp_path / "cache")
    tokenize_chat(
        ChatTokenizeConfig(input=str(tmp_path / "chat.jsonl"), tokenizer=str(tokenizer), chat_template="chatml"), cache
    )
    config = TrainConfig(
        model=MODEL,
        data=MixtureConfig(
            caches={"chat": cache},
            stages=(MixtureStage(0, {"chat": 1.0}),),
            seq_len=64,
            batch_schedule=BatchSchedule.constant(8),
            packing=WholeDocumentsConfig(),
        ),
        num_steps=STEPS,
        optimizer=AdamWConfig(weight_decay=0.0),
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=5, decay_steps=10, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=STEPS, every_minutes=None),
    )
    run_training(config, str(tmp_path / "sft"))
    return tmp_path / "sft"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_transformers_greedy_stops_where_tootsie_stops(tmp_path, chat_tokenizer, capsys) -> None:
    run = _train_chat_model(tmp_path, chat_tokenizer)
    summary = export_hf(run, tmp_path / "hf", tokenizer=chat_tokenizer)
    assert summary["chat_template"]["name"] == "chatml" and summary["chat_template"]["origin"] == FROM_RUN
    hf = _hf_tokenizer(tmp_path / "hf")
    end_of_turn = hf.convert_tokens_to_ids("<|im_end|>")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path / "hf"), dtype=torch.float32, local_files_only=True
    ).eval()
    assert model.generation_config.eos_token_id == [hf.eos_token_id, end_of_turn]

    for word in WORDS:
        message = f"Say {word}."
        capsys.readouterr()
        # no --chat-template: the run's cache ledger says chatml (the tokenizer_config.json names none)
        command = ["generate", str(run), "--tokenizer", str(chat_tokenizer), "--chat", message]
        assert main([*command, "--max-new-tokens", str(MAX_NEW_TOKENS), "--json"]) == 0
        ours = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert ours["stop_reason"] == "end_of_turn" and ours["tokens"][-1] == end_of_turn, (word, ours)
        assert ours["text"] == f"{word} {word}"

        chat = [{"role": "user", "content": message}]
        prompt = _ids(hf.apply_chat_template(chat, add_generation_prompt=True, tokenize=True))
        with torch.no_grad():
            output = model.generate(
                torch.tensor([prompt]), do_sample=False, max_new_tokens=MAX_NEW_TOKENS, pad_token_id=hf.eos_token_id
            )[0].tolist()
        assert output[len(prompt) :] == ours["tokens"], word
