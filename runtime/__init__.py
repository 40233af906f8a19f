"""polc.runtime: compiled policies run in environments, traced, fitted, refined and trained.

One folder per part; imports go one way, down this list (a test checks the graph):

    envs/         the environments polc knows, their schemas, experts and metrics (and a toy one)
    io/           the files: step tables in Parquet, params files; c_policy (generated C built and called)
    trace/        rollouts, evaluation and demonstrations (polc demos, rollout, eval)
    plot/         figures of table columns (polc plot) and the atomic PNG writer
    il/           imitation learning (polc fit): losses, train, cli
    rl/           reinforcement learning (polc rl): losses, collect, train, cli; brax/ on MJX
    diagnostics/  the built-in diagnostics of a trace (polc analyze)
    sandbox/      untrusted analysis code run over a trace in isolation
    llm/          the LLM backends behind one protocol
    task/         a refinement task folder: task.md's header and text, the demonstration, initial.pol
    refine/       the refinement loop (polc generate, polc refine)
    experiment/   the paper's tables from one command (polc experiment)

    cli.py        what every runtime command shares (loading policies, params, tables; exit codes)
    commands.py   registers each part's cli.py with `polc` (nothing imports it back)
"""
