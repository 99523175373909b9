"""Training scripts, run from the repository root as modules: ``python -m scripts.train_gpt --help``."""
