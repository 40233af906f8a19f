"""Figures: columns of a trace or demonstration table (`polc plot`), and the one atomic
PNG writer every other figure (the refinement loop's, the RL curve) goes through.

    figures.py  resolve a column name, plot it, save_figure (PNG/SVG/PDF by extension)
    cli.py      the `polc plot` command
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "figures": ["FIGURE_FORMATS", "Series", "default_output", "figure_format", "plot", "resolve", "save_figure",
                "save_png"],
})
