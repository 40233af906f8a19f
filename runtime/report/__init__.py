"""`polc report`: one self-contained web page for a refinement run, an experiment or a trace.

    run_page(RUNDIR)                the page of a `polc refine` run (page.py draws, run.py reads)
    experiment_page(RESULTSDIR)     the page of a `polc experiment` output directory
    trace_page(TRACE, policy=None)  the page of one step table
    ReportError                     the input is not a run, an experiment or a trace

Every page is one HTML file: style, script, charts (plain SVG drawn in page.py) and
pictures (data: URLs) inside, so it opens from disk with no server and makes no request.
"""

import lazy_loader as lazy

# lazily: `polc` imports report.cli to register the command, which must not load numpy
__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "experiment": ["experiment_page"],
    "page": ["ReportError"],
    "run": ["run_page"],
    "trace": ["trace_page"],
})
