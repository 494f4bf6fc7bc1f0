"""`tootsie generate`: one continuation of a prompt or a chat message; `tootsie chat`: a conversation in the terminal.

Both load a checkpoint (or a training output directory's newest one) with its
model config, decode with the KV cache (`tootsie.models.generate`) and stop at
EOS, at the chat template's end of turn for chats, at `--stop` strings, or after
`--max-new-tokens`. `generate --json` prints `{"text", "tokens", "stop_reason"}`
(`stop_reason`: `end_of_turn`, `eos`, `stop_string` or `max_new_tokens`).
Chats use `--chat-template` when given, else the template the checkpoint's run
trained with (its chat caches' ledgers), else the tokenizer_config.json's, else
llama3.
"""

import argparse
import json
import sys

from tootsie.cli.output import build
from tootsie.datakit.chat_templates import CHAT_TEMPLATES, Message
from tootsie.eval.run_chat_template import checkpoint_chat_template
from tootsie.eval.text_generation import TextGenerator
from tootsie.models.generate import SamplingConfig
from tootsie.train.checkpoint import model_config_of
from tootsie.train.loading import load_model, resolve_checkpoint

EXIT_COMMAND = "/exit"
"""What ends `tootsie chat` (as does end of input)."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint, or a training output directory")
    parser.add_argument("--tokenizer", required=True, metavar="T", help="the tokenizer.json (or its folder)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="most tokens generated (default 256)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (default)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1: off)")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (default 0: off)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--stop", action="append", default=[], metavar="TEXT", help="a stop string (repeatable)")
    parser.add_argument(
        "--chat-template",
        metavar="NAME|FILE",
        help=f"chat template: {', '.join(CHAT_TEMPLATES)} or a Jinja file"
        " (default: the one the checkpoint's run trained with, else the tokenizer_config.json's"
        " chat_template, else llama3)",
    )


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie generate` and `tootsie chat`."""
    generate = subparsers.add_parser("generate", help="continue a prompt or answer a chat message (KV-cache decoding)")
    _common(generate)
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", metavar="TEXT", help="plain text to continue (after BOS)")
    source.add_argument("--chat", metavar="MESSAGE", help="a user message, wrapped in the chat template")
    generate.add_argument("--json", action="store_true", help='print {"text", "tokens", "stop_reason"} as JSON')
    generate.set_defaults(handler=run_generate)
    chat = subparsers.add_parser("chat", help=f"talk to a checkpoint in the terminal ({EXIT_COMMAND} to leave)")
    _common(chat)
    chat.set_defaults(handler=run_chat)


def _load(args: argparse.Namespace, chat: bool) -> tuple[TextGenerator, SamplingConfig]:
    checkpoint = resolve_checkpoint(args.checkpoint)
    recorded = checkpoint_chat_template(checkpoint) if chat and args.chat_template is None else None
    model = load_model(model_config_of(checkpoint), str(checkpoint))
    sampling = build(
        SamplingConfig,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        stop_strings=tuple(args.stop),
    )
    generator = TextGenerator.load(model, args.tokenizer, args.chat_template, recorded and recorded.source)
    return generator, sampling


def run_generate(args: argparse.Namespace) -> int:
    """`tootsie generate`."""
    chat = args.chat is not None
    generator, sampling = _load(args, chat)
    prompt = (
        generator.encode_chat([{"role": "user", "content": args.chat}])
        if chat
        else generator.encode_prompt(args.prompt)
    )
    (result,) = generator.generate([prompt], sampling, chat=chat)
    if args.json:
        print(json.dumps({"text": result.text, "tokens": list(result.tokens), "stop_reason": result.stop_reason}))
    else:
        print(result.text)
        print(f"[{len(result.tokens)} tokens, stop: {result.stop_reason}]", file=sys.stderr)
    return 0


def run_chat(args: argparse.Namespace) -> int:
    """`tootsie chat`: read user lines from stdin, answer each with the whole conversation as context."""
    generator, sampling = _load(args, chat=True)
    messages: list[Message] = []
    print(f"chatting with {args.checkpoint}; {EXIT_COMMAND} or end of input to leave", file=sys.stderr)
    for line in sys.stdin:
        text = line.strip()
        if text == EXIT_COMMAND:
            break
        if not text:
            continue
        messages.append({"role": "user", "content": text})
        (reply,) = generator.generate([generator.encode_chat(messages)], sampling, chat=True)
        messages.append({"role": "assistant", "content": reply.text})
        print(reply.text, flush=True)
    return 0
