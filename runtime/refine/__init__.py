"""The refinement loop of the paper, end to end (`polc generate`, `polc refine`).

From the top down, callers above what they call (a callee gets what it needs handed down,
never its caller, and returns what it did):

    cli.py          the two commands: arguments in, lines out (nothing else)
    entry.py        the library entry point: start(Request) / resume(path, Overrides) -> Outcome;
                    opens or creates the run directory, model, prices, budget; summary after each round
    loop.py         the round state machine: fit, rollout, evaluate, diagnose, converse
    dialogue.py     one round's conversation by feedback mode (analysis | table | none) -> Exchange
    candidates/     --candidates K: revise.py asks for K revisions of one REVISE move and keeps
                    one (-> Outcome); score.py fits and scores them in process; on_ray.py on Ray
    converse.py     recorded, counted LLM calls; reply retries; check-and-repair
    replies.py      parsing replies: code blocks, the move keyword
    context.py      the prompt's pieces: fields, schemas, the history of earlier rounds
    templates.py    the prompt templates in prompts/*.md
    work.py         settings; check, fit, traced rollout and evaluation of a structure
    runcontext.py   RunContext: what the loop hands down (settings, run dir, progress, env, seeds, demo)
    record.py       Round: what a round records, the typed form of its metrics.json
    rundir.py       the run directory: atomic files, done markers, resume
    report.py       progress, the per-round table, summary.json, Figures 4 and 6 (from the JSON form)
    scores.py       a metric's numbers as text and JSON
    budget.py       token and cost budgets
    scripted.py     which model answers; the scripted (bundled) and manual sessions

Where a new per-round number goes: a field of `record.Round` (in the order the loop fills
it), set in loop.py from what the phase that measures it returns (a fit, a rollout: work.py;
the conversation: `dialogue.Exchange`; candidates: `candidates.revise.Outcome`); shown in the table
or summary by report.py, to the model by context.py. A number of the whole run goes in
summary.json (report.py), a setting in `work.Settings`.

Importing this package imports nothing heavy (rollout workers unpickle `envspec`).
"""
