"""Apps over finished or live runs: the HTML run report, the plots and the live dashboard.

They read runs only as files written through `tootsie.monitor` (the run-log library)."""
