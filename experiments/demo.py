"""The tootsie demo as an experiment file: `tootsie run experiments/demo.py` runs the steps `tootsie demo` runs.

The steps are built in the package (`tootsie.demos.stdlib_demo`, where the flow
is described) so that an installed tootsie runs the demo without this
checkout. Other experiment files import the demo's pieces from here, e.g.
`from demo import DemoSettings, build_data_steps` (experiments/isoflop_tiny.py);
tests build the small copy with `build_steps(TINY)`.
"""

from tootsie.demos.stdlib_demo import SOURCES, TINY, DemoSettings, build_data_steps, build_steps

__all__ = ["SOURCES", "STEPS", "TINY", "DemoSettings", "build_data_steps", "build_steps"]

STEPS = build_steps(DemoSettings())
