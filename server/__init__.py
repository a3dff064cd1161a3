"""spanfill.server: the language server (pygls), its completion pipeline, `spanfill serve` and `spanfill demo`."""
