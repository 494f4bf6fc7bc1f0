"""The tests' runtime check of shape annotations: beartype over the jaxtyping array hints of a function, nothing else.

`tests/conftest.py` imports every module that writes `Float[Array, "batch seq"]`-style hints through jaxtyping's
import hook with `check_shapes` as the typechecker. jaxtyping hands it each function's signature (and each
dataclass's `__init__`); only the parameters whose hint holds an array type are checked, so the named axes of one
call must agree, while plain hints stay documentation: the executor fills `str` config fields with step references
before it resolves them, which a full type check would refuse.
"""

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from beartype import beartype
from jaxtyping import AbstractArray


def mentions_array(hint: object) -> bool:
    """Whether a type hint is, or holds (in a union, an optional, a container), a jaxtyping array type."""
    if isinstance(hint, type) and issubclass(hint, AbstractArray):
        return True
    return any(mentions_array(argument) for argument in typing.get_args(hint))


def check_shapes(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with beartype checking its array-typed parameters and return value; `fn` itself when it has none."""
    hints = inspect.get_annotations(fn)
    shaped = {name: hint for name, hint in hints.items() if mentions_array(hint)}
    if not shaped:
        return fn
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__, copy.__module__, copy.__annotations__ = fn.__qualname__, fn.__module__, shaped
    return beartype(copy)
