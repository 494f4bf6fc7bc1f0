"""Chat data: templates render as transformers renders them, masks cover exactly the assistant tokens, rejects count."""

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

from tests.datakit.llama3_tokenizer import build_llama3_tokenizer
from tootsie.cli.main import main
from tootsie.datakit.chat_data import ChatEncoder, check_conversation, iter_conversations
from tootsie.datakit.chat_templates import CHAT_TEMPLATES, END_OF_TURN, load_chat_template, render_chat
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.token_cache import LOSS_MASK_FILE, open_token_cache
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError

USER_TEMPLATE = (
    "{% for m in messages %}{{ '### ' + m['role'] + ':\\n' }}{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### assistant:\\n' }}{% endif %}"
)
CONVERSATIONS = [
    [
        {"role": "system", "content": "You answer in one line."},
        {"role": "user", "content": "What does len do?"},
        {"role": "assistant", "content": "Return the number of items in a container."},
    ],
    [
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "content": "Hi! Café time."},
        {"role": "user", "content": "And bye?"},
        {"role": "assistant", "content": "Bye, 42 times."},
    ],
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict[str, Path]:
    """A Llama 3-style tokenizer folder and a tootsie-trained tokenizer.json."""
    root = tmp_path_factory.mktemp("tokenizers")
    build_llama3_tokenizer(root / "llama3")
    docs = root / "docs"
    texts = [f"{m['role']}: {m['content']}\n" for conversation in CONVERSATIONS for m in conversation] * 20
    write_table_atomic(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / "p.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=300), str(root / "tootsie"))
    return {"llama3": root / "llama3", "tootsie": root / "tootsie" / "tokenizer.json"}


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


@pytest.mark.parametrize("tokenizer_name", ["llama3", "tootsie"])
@pytest.mark.parametrize("template_name", ["llama3", "chatml", "user_file"])
def test_loss_mask_covers_exactly_the_assistant_tokens(tokenizers, tmp_path, tokenizer_name, template_name) -> None:
    if template_name == "user_file":
        (tmp_path / "t.jinja").write_text(USER_TEMPLATE, encoding="utf-8")
        template = load_chat_template(str(tmp_path / "t.jinja"))
    else:
        template = load_chat_template(template_name)
    tokenizer, special = load_with_special_tokens(tokenizers[tokenizer_name])
    end_of_turn = END_OF_TURN.get(template_name, special.eos)
    encoder = ChatEncoder(tokenizer, template, bos_token=special.bos or "", eos_token=special.eos or "")
    for messages in CONVERSATIONS:
        ids, mask = encoder.encode(messages)
        replies = [m["content"] + end_of_turn for m in messages if m["role"] == "assistant"]
        runs = _runs(mask)
        assert [tokenizer.decode(ids[a:b].tolist(), skip_special_tokens=False) for a, b in runs] == replies
        unmasked = tokenizer.decode(ids[mask == 0].tolist(), skip_special_tokens=False)
        for message in messages:
            if message["role"] != "assistant":
                assert message["content"] in unmasked
        full = render_chat(template, messages, False, bos_token=special.bos or "", eos_token=special.eos or "")
        assert ids.tolist() == tokenizer.encode(full, add_special_tokens=False).ids


@pytest.mark.parametrize("template_name", sorted(CHAT_TEMPLATES))
def test_rendering_and_ids_match_transformers(tokenizers, template_name) -> None:
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast.from_pretrained(str(tokenizers["llama3"]))
    hf.chat_template = CHAT_TEMPLATES[template_name]
    tokenizer = Tokenizer.from_file(str(tokenizers["llama3"] / "tokenizer.json"))
    encoder = ChatEncoder(tokenizer, CHAT_TEMPLATES[template_name], bos_token=hf.bos_token)
    for messages in CONVERSATIONS:
        for cut, prompt in ((len(messages), False), (len(messages) - 1, True)):
            text = render_chat(CHAT_TEMPLATES[template_name], messages[:cut], prompt, bos_token=hf.bos_token)
            assert text == hf.apply_chat_template(messages[:cut], tokenize=False, add_generation_prompt=prompt)
        ids, _ = encoder.encode(messages)
        expected = hf.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert ids.tolist() == list(expected)


LLAMA32_HEADER_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- if not date_string is defined %}\n"
    "    {%- if strftime_now is defined %}\n"
    '        {%- set date_string = strftime_now("%d %b %Y") %}\n'
    "    {%- else %}\n"
    '        {%- set date_string = "26 Jul 2024" %}\n'
    "    {%- endif %}\n"
    "{%- endif %}\n"
    '{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}\n'
    '{{- "Cutting Knowledge Date: December 2023\\n" }}\n'
    '{{- "Today Date: " + date_string + "\\n\\n" }}\n'
    '{{- "<|eot_id|>" }}\n'
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n"
)
"""The date handling of Llama 3.2 Instruct's template (its tokenizer_config.json), without the tool-calling parts."""


def test_a_template_that_asks_for_the_date_gets_a_fixed_one(tokenizers, monkeypatch) -> None:
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast.from_pretrained(str(tokenizers["llama3"]))
    hf.chat_template = LLAMA32_HEADER_TEMPLATE
    messages = CONVERSATIONS[0][1:]
    texts = []
    try:
        for zone in ("UTC", "Pacific/Kiritimati", "Etc/GMT+12"):  # a day apart: one of them is another date than UTC
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            texts.append(render_chat(LLAMA32_HEADER_TEMPLATE, messages, True, bos_token=hf.bos_token))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert texts == [texts[0]] * 3 and "Today Date: 26 Jul 2024\n" in texts[0]
    expected = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, date_string="26 Jul 2024")
    assert texts[0] == expected
    other = render_chat(LLAMA32_HEADER_TEMPLATE, messages, True, bos_token=hf.bos_token, date="2025-01-02")
    assert "Today Date: 02 Jan 2025\n" in other
    encoder = ChatEncoder(Tokenizer.from_file(str(tokenizers["llama3"] / "tokenizer.json")), LLAMA32_HEADER_TEMPLATE)
    ids, mask = encoder.encode(CONVERSATIONS[0][1:])
    assert mask.sum() > 0 and len(ids) == len(mask)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "bad_json"),
        ('{"text": "plain"}', "not_a_conversation"),
        ('{"messages": []}', "not_a_conversation"),
        ('{"messages": [{"role": "tool", "content": "42"}, {"role": "assistant", "content": "ok"}]}', "unknown_role"),
        ('{"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "ok"}]}', "bad_content"),
        ('{"messages": [{"role": "user", "content": "  "}, {"role": "assistant", "content": "ok"}]}', "empty_content"),
        ('{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}', "no_assistant_turn"),
    ],
)
def test_malformed_conversations_are_rejected_by_reason(line, reason) -> None:
    assert check_conversation(line) == reason


def test_tokenize_chat_cli_counts_rejects_and_writes_the_mask(tokenizers, tmp_path, capsys) -> None:
    lines = [json.dumps({"messages": messages}) for messages in CONVERSATIONS]
    lines += ["{oops", '{"messages": [{"role": "user", "content": "q"}]}', ""]
    (tmp_path / "chat.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["datakit", "tokenize", str(tmp_path / "chat.jsonl"), "--tokenizer", str(tokenizers["llama3"])]
    assert main([*args, "--format", "chat", "--chat-template", "chatml", "--out", str(tmp_path / "c"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cache = open_token_cache(tmp_path / "c")
    assert report == {
        "conversations": 2,
        "tokens": cache.num_tokens,
        "loss_tokens": int(np.asarray(cache.loss_mask).sum()),
        "rejected": {"bad_json": 1, "no_assistant_turn": 1},
    }
    assert cache.ledger["files"][LOSS_MASK_FILE] == cache.num_tokens == len(cache.loss_mask)
    assert 0 < report["loss_tokens"] < report["tokens"]


def test_bad_template_and_missing_input_are_clear_errors(tmp_path) -> None:
    (tmp_path / "bad.jinja").write_text("{% for m in messages %}", encoding="utf-8")
    with pytest.raises(TootsieError, match="not a valid Jinja template"):
        load_chat_template(str(tmp_path / "bad.jinja"))
    with pytest.raises(TootsieError, match="neither a built-in"):
        load_chat_template("llama4")
    with pytest.raises(TootsieError, match="not a JSONL file"):
        list(iter_conversations(tmp_path / "missing", Counter()))
