"""The experiment suite's Python side: library modules (paths, registry, benchmark JSON, result
files, cost model, statistics, summary, Table 1, figure data, GPU lock) and one module per
command under xcsuite/cli/, run as `python -m xcsuite <command>` from the repository root (docs/commands.md). Nothing here is
installed: the repository root, which also holds experiments/, is the path."""
