"""Text generation: prompts get BOS, chats the template, stops and chat templates resolve as documented."""

import json

import jax
import pyarrow as pa
import pytest

from tootsie.datakit.chat_templates import CHAT_TEMPLATES, LLAMA3_TEMPLATE, render_chat
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.special_tokens import resolve_special_tokens
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_bpe
from tootsie.eval.text_generation import TextGenerator, end_of_turn_markers, resolve_chat_template
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.llama import LlamaConfig, LlamaModel


@pytest.fixture(scope="module")
def generator(tmp_path_factory) -> TextGenerator:
    docs = tmp_path_factory.mktemp("docs")
    texts = [f"def area{i}(width, height):\n    return width * height\n" for i in range(40)]
    write_table_atomic(pa.table({"id": [str(i) for i in range(40)], "text": texts}), docs / "part-00000.parquet")
    tokenizer = train_bpe(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=300))
    config = LlamaConfig(vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)
    model = LlamaModel(config, key=jax.random.PRNGKey(0))
    return TextGenerator(model, tokenizer, resolve_special_tokens(tokenizer, None), LLAMA3_TEMPLATE)


def test_prompts_start_with_bos_and_chats_are_rendered(generator: TextGenerator) -> None:
    assert generator.encode_prompt("def area")[0] == generator.bos_id
    assert generator.encode_prompt("<|bos|>def")[:2] != [generator.bos_id, generator.bos_id]
    messages = [{"role": "user", "content": "def area"}]
    rendered = render_chat(LLAMA3_TEMPLATE, messages, add_generation_prompt=True, bos_token="<|bos|>")
    assert generator.encode_chat(messages) == generator.tokenizer.encode(rendered, add_special_tokens=False).ids
    # tootsie's own tokenizer has no <|eot_id|> token, so the end of turn is a stop string.
    assert generator.turn_ids == () and generator.turn_strings == ("<|eot_id|>",)


def test_stop_strings_cut_the_text(generator: TextGenerator) -> None:
    prompt = generator.encode_prompt("def area")
    (free,) = generator.generate([prompt], SamplingConfig(max_new_tokens=8))
    assert (
        free.tokens
        == generate(generator.model, [prompt], SamplingConfig(max_new_tokens=8, stop_tokens=(generator.eos_id,)))[
            0
        ].tokens
    )
    assert free.text == generator.decode(list(free.tokens))
    stop = free.text[len(free.text) // 2 :][:1] or "x"
    (cut,) = generator.generate([prompt], SamplingConfig(max_new_tokens=8, stop_strings=(stop,)))
    if stop in free.text:
        assert cut.stop_reason == "stop_string" and cut.text == free.text.split(stop)[0]


def test_chat_template_resolution(tmp_path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0]['content'] }}"}))
    assert resolve_chat_template(None, tmp_path / "tokenizer.json") == "{{ messages[0]['content'] }}"
    assert resolve_chat_template("llama3", tmp_path) == LLAMA3_TEMPLATE
    assert resolve_chat_template(None, tmp_path / "elsewhere" / "tokenizer.json") == LLAMA3_TEMPLATE


def test_end_of_turn_markers_come_from_rendering_the_template() -> None:
    assert end_of_turn_markers(CHAT_TEMPLATES["chatml"]) == ("<|im_end|>",)
    assert end_of_turn_markers(CHAT_TEMPLATES["llama3"], bos_token="<|bos|>") == ("<|eot_id|>",)
    closes_with_eos = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% if m['role'] == 'assistant' %}"
    closes_with_eos += "{{ eos_token }}{% endif %}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
    assert end_of_turn_markers(closes_with_eos, eos_token="<|eos|>") == ("<|eos|>",)


def test_a_chat_reply_reaching_the_end_of_turn_marker_reports_end_of_turn(generator: TextGenerator) -> None:
    # a template closing assistant turns with a letter the random model writes anyway; its prompt is BOS and
    # the user's text, as a plain prompt is, so the free continuation does not depend on the letter
    prompt = generator.encode_prompt("def area")
    (free,) = generator.generate([prompt], SamplingConfig(max_new_tokens=8))
    letter = next(c for c in free.text if c.isascii() and c.isalpha())
    template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}"
    template += letter + "{% endif %}{% endfor %}"
    special = resolve_special_tokens(generator.tokenizer, None)
    ending = TextGenerator(generator.model, generator.tokenizer, special, template)
    assert ending.encode_chat([{"role": "user", "content": "def area"}]) == prompt
    (reply,) = ending.generate([prompt], SamplingConfig(max_new_tokens=8), chat=True)
    assert reply.stop_reason == "end_of_turn" and free.tokens[: len(reply.tokens)] == reply.tokens
    assert letter in generator.decode(list(reply.tokens)) and letter not in reply.text
    (plain,) = ending.generate([prompt], SamplingConfig(max_new_tokens=8))
    assert plain.stop_reason != "end_of_turn" and plain.tokens == free.tokens
