"""Built-in diagnostics of a rollout trace (`polc analyze`): the checks an analyst writes
every time, done once, with no LLM and no JAX.

    base.py     the shared types (Finding, Steps, Params, the check names) and the inputs' loading
    checks.py   trace, weights, signs, intents: the claims of the program against the data
    values.py   reconstruction, observation ranges, branches, latent statistics
    memory.py   states: saturated on a bound, or drifting through an episode
    demo.py     the policy's actions against a demonstration's at matched states
    text.py     the report as compact plain text, problems first
    report.py   Report and builtin_report, which runs them all in order
    cli.py      the `polc analyze` command

Modules import only downward (base at the bottom); names are loaded on first use.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "base": ["CHECKS", "SEVERITIES", "DiagnosticsError", "Finding", "as_sentence", "load_steps"],
    "report": ["Report", "builtin_report"],
})
