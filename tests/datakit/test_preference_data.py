"""Preference pairs: malformed lines rejected by reason, masks on the reply tokens only, one pair per document."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.datakit.llama3_tokenizer import build_llama3_tokenizer
from tootsie.corpora.stdlib_chat import HELDOUT_FILE, TRAIN_FILE, StdlibChatConfig, build_stdlib_chat
from tootsie.corpora.stdlib_preferences import StdlibPreferenceConfig, build_stdlib_preferences
from tootsie.datakit.chat_templates import END_OF_TURN
from tootsie.datakit.preference_data import (
    CHOSEN_TOKENS_FILE,
    PreferenceTokenizeConfig,
    check_pair,
    iter_pairs,
    tokenize_preferences,
)
from tootsie.datakit.token_cache import open_token_cache

SYSTEM = {"role": "system", "content": "Be brief."}
GOOD = [
    {"prompt": "What does len do?", "chosen": "Return the number of items.", "rejected": "Return the absolute value."},
    {
        "messages": [
            SYSTEM,
            {"role": "user", "content": "Say hi"},
            {"role": "assistant", "content": "Hello there."},
            {"role": "user", "content": "And bye?"},
        ],
        "chosen": [{"role": "assistant", "content": "Goodbye, friend."}],
        "rejected": "Banana.",
    },
]
BAD = {
    "{not json": "bad_json",
    json.dumps({"prompt": "q", "chosen": "a"}): "missing_field",
    json.dumps({"chosen": "a", "rejected": "b"}): "missing_field",
    json.dumps([1, 2]): "missing_field",
    json.dumps({"prompt": "q", "messages": [SYSTEM], "chosen": "a", "rejected": "b"}): "bad_prompt",
    json.dumps({"messages": "hi", "chosen": "a", "rejected": "b"}): "bad_prompt",
    json.dumps({"prompt": 3, "chosen": "a", "rejected": "b"}): "bad_prompt",
    json.dumps({"prompt": "q", "chosen": 5, "rejected": "b"}): "bad_reply",
    json.dumps({"prompt": "q", "chosen": [{"role": "user", "content": "x"}], "rejected": "b"}): "bad_reply",
    json.dumps({"messages": [{"role": "tool", "content": "x"}], "chosen": "a", "rejected": "b"}): "unknown_role",
    json.dumps({"messages": [{"role": "user", "content": 1}], "chosen": "a", "rejected": "b"}): "bad_content",
    json.dumps({"prompt": "  ", "chosen": "a", "rejected": "b"}): "empty",
    json.dumps({"prompt": "q", "chosen": "", "rejected": "b"}): "empty",
    json.dumps({"prompt": "q", "chosen": "same", "rejected": "same"}): "identical",
}


@pytest.mark.parametrize(("line", "reason"), list(BAD.items()))
def test_malformed_pairs_are_rejected_by_reason(line: str, reason: str) -> None:
    assert check_pair(line) == reason


def test_iter_pairs_keeps_the_good_lines_and_counts_the_rest(tmp_path: Path) -> None:
    source = tmp_path / "pairs.jsonl"
    source.write_text("\n".join([json.dumps(p) for p in GOOD] + list(BAD) + [""]) + "\n", encoding="utf-8")
    rejected: Counter[str] = Counter()
    pairs = list(iter_pairs(source, rejected))
    assert [p.chosen[-1]["content"] for p in pairs] == ["Return the number of items.", "Goodbye, friend."]
    assert pairs[0].prompt == [{"role": "user", "content": "What does len do?"}]
    assert rejected == Counter(BAD.values())


@pytest.mark.parametrize("template", ["llama3", "chatml"])
def test_pair_cache_masks_only_the_reply_tokens(tmp_path: Path, template: str) -> None:
    build_llama3_tokenizer(tmp_path / "tok")
    source = tmp_path / "pairs.jsonl"
    too_long = {"prompt": "word " * 1500, "chosen": "a", "rejected": "b"}
    source.write_text("".join(json.dumps(p) + "\n" for p in [*GOOD, too_long]), encoding="utf-8")
    config = PreferenceTokenizeConfig(str(source), str(tmp_path / "tok"), chat_template=template, max_tokens=600)
    ledger = tokenize_preferences(config, str(tmp_path / "cache"))
    assert (ledger["pairs"], ledger["rejected"]) == (2, {"too_long": 1})
    cache = open_token_cache(tmp_path / "cache")
    lengths = np.load(tmp_path / "cache" / CHOSEN_TOKENS_FILE)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    end = END_OF_TURN[template]
    for pair, doc in zip(GOOD, range(cache.num_docs), strict=True):
        start, stop = int(cache.offsets[doc]), int(cache.offsets[doc + 1])
        tokens, mask = np.asarray(cache.tokens[start:stop]), np.asarray(cache.loss_mask[start:stop])
        chosen_reply = pair["chosen"] if isinstance(pair["chosen"], str) else pair["chosen"][-1]["content"]
        halves = {"chosen": slice(0, int(lengths[doc])), "rejected": slice(int(lengths[doc]), None)}
        for side, reply in (("chosen", chosen_reply), ("rejected", pair["rejected"])):
            masked = tokens[halves[side]][mask[halves[side]] == 1]
            # exactly the reply and its end of turn: the prompt (even its assistant turn "Hello there.") stays off
            assert tokenizer.decode(masked.tolist(), skip_special_tokens=False).strip() == reply + end
            unmasked = tokenizer.decode(tokens[halves[side]][mask[halves[side]] == 0].tolist())
            assert "Hello there." in unmasked or doc == 0
        assert ledger["longest_pair"] >= stop - start


def test_stdlib_preferences_pair_each_answer_with_a_wrong_one(tmp_path: Path) -> None:
    build_stdlib_chat(StdlibChatConfig(modules=("json", "math")), str(tmp_path / "chat"))
    counts = build_stdlib_preferences(StdlibPreferenceConfig(chat_sets=(str(tmp_path / "chat"),)), str(tmp_path / "p"))
    chat = {split: (tmp_path / "chat" / split).read_text().splitlines() for split in (TRAIN_FILE, HELDOUT_FILE)}
    assert counts == {"train": len(chat[TRAIN_FILE]), "heldout": len(chat[HELDOUT_FILE])}
    for split in (TRAIN_FILE, HELDOUT_FILE):
        rejected: Counter[str] = Counter()
        pairs = list(iter_pairs(tmp_path / "p" / split, rejected))
        assert not rejected and len(pairs) == len(chat[split])
        for index, (pair, line) in enumerate(zip(pairs, chat[split], strict=True)):
            messages = json.loads(line)["messages"]
            assert pair.prompt == messages[:-1] and pair.chosen == messages[-1:]
            wrong, right = pair.rejected[0]["content"], messages[-1]["content"]
            if index % 2 == 1:  # shuffled: the same words in another order
                assert sorted(wrong.split()) == sorted(right.split()) and wrong != right
            else:  # another conversation's answer
                assert wrong != right and wrong in {json.loads(c)["messages"][-1]["content"] for c in chat[split]}
