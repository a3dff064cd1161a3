"""The model family seam and the spanfill model: configuration, weights, tokenizer, device and dtype
choice, int8 matmuls. Everything that knows a model's tensors lives here; decoding sees only
`family.ModelFamily`."""
