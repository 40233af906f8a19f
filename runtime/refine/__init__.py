"""The refinement loop of the paper, end to end (`polc generate`, `polc refine`).

    loop.py       the round state machine: fit, rollout, evaluate, diagnose, converse
    dialogue.py   one round's conversation by feedback mode (analysis | table | none)
    converse.py   recorded, counted LLM calls; reply retries; check-and-repair
    replies.py    parsing replies: code blocks, the move keyword
    templates.py  the prompt templates in prompts/*.md
    rundir.py     the run directory: atomic files, done markers, resume
    report.py     progress, the per-round table, summary.json, Figures 4 and 6
    scripted.py   which model answers; the scripted (bundled) and manual sessions
    work.py       settings; check, fit, traced rollout and evaluation of a structure
    candidates/   --candidates K: K revisions per REVISE move, asked, scored (on Ray too), one kept
    cli.py        the two commands

Importing this package imports nothing heavy (rollout workers unpickle `envspec`).
"""
