"""A refinement task as a folder: what `polc refine`, `polc experiment` and `polc report` read.

    header.py   a Markdown file's `---` header (`key: value` lines) and the text after it
    folder.py   `load_task`: task.md (header and the text the model reads), the demonstration,
                the initial structure; `TaskError` says what to fix in the folder

Importing this package imports nothing heavy.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "header": ["front_matter"],
    "folder": ["Task", "TaskError", "load_task"],
})
