"""User-facing errors: one line that says what failed and how to fix it.

The CLI prints a `TootsieError` as `tootsie: <message>` and exits non-zero
without a traceback; any other exception is a bug and keeps its traceback.
"""


class TootsieError(Exception):
    """An error caused by the user's input (a file, a flag, a config), not by tootsie."""
