"""spanfill.engine: the diffusion infill engine."""
