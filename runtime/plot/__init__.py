"""Figures: columns of a trace or demonstration table (`polc plot`), and the one atomic
PNG writer every other figure (the refinement loop's, the RL curve) goes through.

    figures.py  resolve a column name, plot it, save_png
    cli.py      the `polc plot` command
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "figures": ["Series", "default_output", "plot", "resolve", "save_png"],
})
