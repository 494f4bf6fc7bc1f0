"""Synthetic text for the tiny recipes and case studies: grade-school math and instruction/response pairs.

The stdlib corpus (`tootsie.corpora.stdlib_source`) gives real code and prose,
but the recipes' mixtures also weight math (FineMath, MegaMath, ProofPile 2,
Dolmino math) and instruction data (FLAN, Tulu, StackExchange, science QA),
which a Python install does not hold. These generators make stand-ins from a
seeded `numpy.random.Generator`, so the same seed gives the same text on every
machine:

- `math_problem`: a GSM8K-style word problem and its integer answer, from ten
  templates whose fixed stretches are at most a few words long (a name, an
  object, a day or a number every few words, the question's tail included).
  Two problems from the same template share a word 13-gram only when every
  slot inside that window has the same value, so 13-gram decontamination tells
  a copied test item from a sibling.
- `math_document`: a few problems with worked answers, plus an arithmetic drill.
- `instruction_document`: FLAN-style instruction/response pairs over small
  word and number tasks.

Example: `math_problem(numpy.random.default_rng(0))` returns a question such as
"On Friday, Maya bought 7 packs of pencils with 12 pencils in each pack. How
many pencils did Maya buy on Friday?" and its answer 84.
"""

from collections.abc import Callable

import numpy as np

NAMES = (
    "Maya",
    "Liam",
    "Noah",
    "Emma",
    "Ava",
    "Lucas",
    "Mia",
    "Ethan",
    "Zoe",
    "Omar",
    "Priya",
    "Kenji",
    "Sofia",
    "Mateo",
    "Leila",
    "Ivan",
    "Grace",
    "Hugo",
    "Nora",
    "Felix",
    "Amara",
    "Tariq",
    "Elena",
    "Jonas",
    "Wei",
    "Rosa",
    "Diego",
    "Hana",
    "Samir",
    "Ingrid",
)
ITEMS = (
    "apples",
    "pencils",
    "marbles",
    "stickers",
    "cookies",
    "books",
    "stamps",
    "shells",
    "cards",
    "buttons",
    "oranges",
    "crayons",
    "coins",
    "beads",
    "tickets",
    "muffins",
    "plums",
    "candles",
    "ribbons",
    "blocks",
)
CONTAINERS = ("box", "basket", "jar", "bag", "crate", "drawer", "bucket", "tin")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
GROUPS = ("friends", "children", "teams", "neighbors", "classmates", "cousins")
SHOPS = ("market", "bakery", "shop", "kiosk", "store", "stall")
SUBJECTS = ("music", "soccer", "chess", "painting", "science", "history", "swimming", "drama")
WORDS = (
    "apple",
    "river",
    "garden",
    "window",
    "silver",
    "planet",
    "forest",
    "candle",
    "market",
    "pencil",
    "rocket",
    "yellow",
    "bridge",
    "island",
    "violin",
    "orange",
    "shadow",
    "marble",
    "winter",
    "button",
    "castle",
    "dragon",
    "meadow",
    "copper",
    "lantern",
    "harbor",
)


def _name_pair(rng: np.random.Generator) -> tuple[str, str]:
    first, second = rng.choice(len(NAMES), size=2, replace=False)
    return NAMES[first], NAMES[second]


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _two(rng: np.random.Generator, options: tuple[str, ...]) -> tuple[str, str]:
    first, second = rng.choice(len(options), size=2, replace=False)
    return options[first], options[second]


def _t_more(rng: np.random.Generator) -> tuple[str, int]:
    (name, other), item, a, b = _name_pair(rng), _pick(rng, ITEMS), int(rng.integers(3, 60)), int(rng.integers(2, 40))
    return (
        f"{name} has {a} {item}. On {_pick(rng, DAYS)}, {other} gives "
        f"{name} {b} more {item}. How many {item} does {name} have now?",
        a + b,
    )


def _t_packs(rng: np.random.Generator) -> tuple[str, int]:
    name, item, day, a, b = (
        _pick(rng, NAMES),
        _pick(rng, ITEMS),
        _pick(rng, DAYS),
        int(rng.integers(2, 13)),
        int(rng.integers(3, 25)),
    )
    return (
        f"On {day}, {name} bought {a} packs of {item} with {b} {item} "
        f"in each pack. How many {item} did {name} buy on {day}?",
        a * b,
    )


def _t_container(rng: np.random.Generator) -> tuple[str, int]:
    name, item, box, day = _pick(rng, NAMES), _pick(rng, ITEMS), _pick(rng, CONTAINERS), _pick(rng, DAYS)
    a, b, c = int(rng.integers(20, 90)), int(rng.integers(2, 19)), int(rng.integers(2, 30))
    return (
        f"A {box} holds {a} {item}. On {day}, {name} takes out {b} {item} "
        f"and puts in {c}. How many {item} are in the {box} after {day}?",
        a - b + c,
    )


def _t_pages(rng: np.random.Generator) -> tuple[str, int]:
    name, (day, day2) = _pick(rng, NAMES), _two(rng, DAYS)
    a, b = int(rng.integers(5, 60)), int(rng.integers(5, 60))
    c = a + b + int(rng.integers(10, 200))
    return (
        f"{name} reads {a} pages on {day} and {b} pages on {day2}. The book "
        f"has {c} pages. How many pages does {name} have left after {day2}?",
        c - a - b,
    )


def _t_wage(rng: np.random.Generator) -> tuple[str, int]:
    name, shop, day, a, b = (
        _pick(rng, NAMES),
        _pick(rng, SHOPS),
        _pick(rng, DAYS),
        int(rng.integers(8, 40)),
        int(rng.integers(2, 11)),
    )
    return (
        f"{name} earns {a} dollars an hour at the {shop} and works {b} "
        f"hours on {day}. How much does {name} earn at the {shop} on {day}?",
        a * b,
    )


def _t_share(rng: np.random.Generator) -> tuple[str, int]:
    item, group, day, b, k = (
        _pick(rng, ITEMS),
        _pick(rng, GROUPS),
        _pick(rng, DAYS),
        int(rng.integers(2, 12)),
        int(rng.integers(2, 15)),
    )
    return (
        f"There are {b * k} {item} shared equally among {b} {group} "
        f"on {day}. How many {item} does each of the {b} {group} get?",
        k,
    )


def _t_run(rng: np.random.Generator) -> tuple[str, int]:
    name, day, a, b, c = (
        _pick(rng, NAMES),
        _pick(rng, DAYS),
        int(rng.integers(2, 15)),
        int(rng.integers(3, 10)),
        int(rng.integers(1, 25)),
    )
    return (
        f"{name} runs {a} kilometers each morning for {b} days and {c} "
        f"kilometers on {day}. How many kilometers did {name} run in total?",
        a * b + c,
    )


def _t_change(rng: np.random.Generator) -> tuple[str, int]:
    name, item, shop = _pick(rng, NAMES), _pick(rng, ITEMS), _pick(rng, SHOPS)
    a, c = int(rng.integers(2, 15)), int(rng.integers(2, 9))
    b = a * c + int(rng.integers(1, 50))
    return (
        f"A {shop} sells {item} at {a} dollars each. {name} pays {b} dollars "
        f"for {c} {item}. How much change does {name} get from the {shop}?",
        b - a * c,
    )


def _t_age(rng: np.random.Generator) -> tuple[str, int]:
    (name, other), a, b, c = (
        _name_pair(rng),
        int(rng.integers(4, 50)),
        int(rng.integers(1, 30)),
        int(rng.integers(2, 20)),
    )
    return (
        f"{name} is {a} years old. {other} is {b} years older than {name}. How old will {other} be in {c} years?",
        a + b + c,
    )


def _t_class(rng: np.random.Generator) -> tuple[str, int]:
    name, (subject, other), a = _pick(rng, NAMES), _two(rng, SUBJECTS), int(rng.integers(15, 45))
    b = int(rng.integers(1, a))
    return (
        f"{name} has {a} classmates: {b} of them like {subject} and the rest "
        f"like {other}. How many of the {a} classmates of {name} like {other}?",
        a - b,
    )


TEMPLATES: tuple[Callable[[np.random.Generator], tuple[str, int]], ...] = (
    _t_more,
    _t_packs,
    _t_container,
    _t_pages,
    _t_wage,
    _t_share,
    _t_run,
    _t_change,
    _t_age,
    _t_class,
)


def math_problem(rng: np.random.Generator) -> tuple[str, int]:
    """A GSM8K-style word problem (one of ten templates) and its integer answer."""
    return TEMPLATES[int(rng.integers(len(TEMPLATES)))](rng)


def math_document(rng: np.random.Generator) -> str:
    """Two to five worked word problems followed by an arithmetic drill."""
    parts = []
    for _ in range(int(rng.integers(2, 6))):
        question, answer = math_problem(rng)
        parts.append(f"Question: {question}\nAnswer: The answer is {answer}.")
    drill = []
    for _ in range(int(rng.integers(3, 8))):
        a, b = int(rng.integers(2, 100)), int(rng.integers(2, 100))
        op = _pick(rng, ("+", "-", "*"))
        drill.append(f"{a} {op} {b} = {a + b if op == '+' else a - b if op == '-' else a * b}")
    parts.append("Practice: " + "; ".join(drill) + ".")
    return "\n\n".join(parts)


def _task(rng: np.random.Generator) -> tuple[str, str]:
    kind = int(rng.integers(6))
    if kind == 0:
        # Sorted before the random key: a set's iteration order follows PYTHONHASHSEED, the rng's draws must not.
        distinct = sorted({_pick(rng, WORDS) for _ in range(int(rng.integers(3, 6)))})
        words = sorted(distinct, key=lambda _: rng.random())
        return f"Sort these words alphabetically: {', '.join(words)}.", ", ".join(sorted(words)) + "."
    if kind == 1:
        word = _pick(rng, WORDS)
        return f"Reverse the word '{word}'.", word[::-1]
    if kind == 2:
        word = _pick(rng, WORDS)
        return f"How many letters are in the word '{word}'?", str(len(word))
    if kind == 3:
        a = int(rng.integers(2, 90))
        return f"Convert {a} kilometers to meters.", f"{a} kilometers is {a * 1000} meters."
    if kind == 4:
        a, b = (int(x) for x in rng.choice(1000, size=2, replace=False))
        return f"Which is larger, {a} or {b}?", f"{max(a, b)} is larger."
    word = _pick(rng, WORDS)
    return f"Write the word '{word}' in capital letters.", word.upper()


def instruction_document(rng: np.random.Generator) -> str:
    """Two to six instruction/response pairs (FLAN-style small tasks)."""
    pairs = [_task(rng) for _ in range(int(rng.integers(2, 7)))]
    return "\n\n".join(f"Instruction: {instruction}\nResponse: {response}" for instruction, response in pairs)
