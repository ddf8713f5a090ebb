"""Shared code of the experiment scripts (run_experiments, aggregate, plot, table, claims,
application): paths, the registry, the benchmark JSON format, the cost model and statistics."""
