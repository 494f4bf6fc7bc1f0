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
import sys

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import print_json
from tootsie.datakit.chat_templates import CHAT_TEMPLATES, Message
from tootsie.models.generate import SamplingConfig

EXIT_COMMAND = "/exit"
"""What ends `tootsie chat` (as does end of input)."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint, or a training output directory")
    parser.add_argument("--tokenizer", required=True, metavar="T", help="the tokenizer.json (or its folder)")
    add_config_flags(
        parser,
        SamplingConfig,
        exclude=("stop_tokens",),
        renames={"stop_strings": "stop"},
        metavars={"stop_strings": "TEXT"},
    )
    parser.add_argument(
        "--chat-template",
        metavar="NAME|FILE",
        help=f"chat template: {', '.join(CHAT_TEMPLATES)} or a Jinja file"
        " (default: the one the checkpoint's run trained with, else the tokenizer_config.json's"
        " chat_template, else llama3)",
    )
    add_output_flags(parser)


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie generate` and `tootsie chat`."""
    generate = subparsers.add_parser("generate", help="continue a prompt or answer a chat message (KV-cache decoding)")
    _common(generate)
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", metavar="TEXT", help="plain text to continue (after BOS)")
    source.add_argument("--chat", metavar="MESSAGE", help="a user message, wrapped in the chat template")
    generate.set_defaults(handler=run_generate)
    chat = subparsers.add_parser("chat", help=f"talk to a checkpoint in the terminal ({EXIT_COMMAND} to leave)")
    _common(chat)
    chat.set_defaults(handler=run_chat)


def run_generate(args: argparse.Namespace) -> int:
    """`tootsie generate`: the text on stdout, its length and stop reason on stderr (or all three as JSON)."""
    from tootsie.eval.checkpoint_eval import load_generator

    chat = args.chat is not None
    sampling = config_from_args(args, SamplingConfig)
    generator = load_generator(args.checkpoint, args.tokenizer, args.chat_template, chat=chat)
    prompt = (
        generator.encode_chat([{"role": "user", "content": args.chat}])
        if chat
        else generator.encode_prompt(args.prompt)
    )
    (result,) = generator.generate([prompt], sampling, chat=chat)
    if args.json:
        print_json({"text": result.text, "tokens": list(result.tokens), "stop_reason": result.stop_reason})
    else:
        print(result.text)
        if not args.quiet:
            print(f"[{len(result.tokens)} tokens, stop: {result.stop_reason}]", file=sys.stderr)
    return 0


def run_chat(args: argparse.Namespace) -> int:
    """`tootsie chat`: read user lines from stdin, answer each with the whole conversation as context.

    With `--json` the replies are not printed one by one: the whole conversation is one JSON object at the end.
    """
    from tootsie.eval.checkpoint_eval import load_generator

    sampling = config_from_args(args, SamplingConfig)
    generator = load_generator(args.checkpoint, args.tokenizer, args.chat_template, chat=True)
    messages: list[Message] = []
    if not args.quiet:
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
        if not args.json:
            print(reply.text, flush=True)
    if args.json:
        print_json({"messages": messages})
    return 0
