"""Questions over an engine's capacity: concurrency, context, workload fit, fewest GPUs, the
decode floor and offload; capacity checks for CI; sweeps over grids."""
