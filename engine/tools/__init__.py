"""Command-line tools behind `spanfill data|train|eval|batch|export-llama` and `ship`: thin
drivers over the engine's public API and the training package."""
