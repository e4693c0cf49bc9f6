"""graphbench: measure what torch.compile and CUDA graphs cost and buy in LLM decoding."""

__version__ = "0.1.0"
