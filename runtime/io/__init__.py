"""The files polc reads and writes besides `.pol` sources:

    table.py    step tables (traces and demonstrations) in Parquet: ColumnSpec, TableWriter, read_table
    params.py   params files (JSON): fitted weights by name, their hashes, the policy's structure
    demo_check.py  a demonstration vetted before a fit: partial, or outside the declared ranges
    lock.py     the exclusive lock a command holds on its run directory (refine, rl, experiment)
    cache_dirs.py  where polc's caches live (XDG_CACHE_HOME/polc, per CPU) and POLC_NO_COMPILE_CACHE
    executables.py compiled steps kept on disk: a warm process loads them instead of tracing

Names are loaded on first use, so importing the package costs nothing (pyarrow waits for a table).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "table": ["ColumnSpec", "Table", "TableError", "TableWriter", "read_table", "step_columns"],
    "params": ["ParamsError", "checked_values", "load_params", "params_sha256", "read_params", "save_params", "structure_sha256"],
    "lock": ["DirectoryLocked", "lock_directory"],
    "demo_check": ["DemoRejected", "OutOfRange", "non_finite_columns", "out_of_range", "partial_note", "range_report", "vet_demo"],
})
