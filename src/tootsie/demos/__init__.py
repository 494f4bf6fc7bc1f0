"""Demos shipped with the package: experiments that `tootsie demo` runs from any install, with no source checkout.

`stdlib_demo` is the README's main job: text from the running Python's
standard library to an evaluated model, every stage a versioned step. It sits
above every other layer but the CLI, since it strings datakit, data, train,
eval and monitor steps together.
"""
