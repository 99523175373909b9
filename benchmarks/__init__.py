"""Speed measurements, run from the repository root as modules: ``python -m benchmarks.bench_self_attention``."""
