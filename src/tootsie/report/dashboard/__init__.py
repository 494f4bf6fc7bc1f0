"""The live dashboard: a local web page over the metric files of training runs, updated while they train.

`tootsie dashboard PREFIX_OR_RUN...` finds the training runs under the given
roots (`runs`), indexes each `metrics.jsonl` incrementally (`metrics_index`)
and serves a JSON API and one page (`server`) whose JavaScript plots the
chosen runs overlaid with the vendored uPlot (`static/vendor`, MIT). The page
loads nothing from the internet, and the server reads only the files of the
runs it found under the roots and its own static files.
"""
