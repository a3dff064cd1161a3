"""The hot path: context windows and prompt layout, token healing, the context KV cache, the
denoising loop and its step rules, and the backends that run the step (eager, compiled CPU, CUDA
graphs, Triton kernels), then the text post-processing an editor shows."""
