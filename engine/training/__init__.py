"""Training: the corpus and its held-out split, training samples cut at realistic cursors, the
two-in-one objective (AR + masked diffusion), and the resumable training loop."""
