"""kernel-deps: lock, download, verify and load compute kernels from the Hugging Face Hub."""

__version__ = "0.1.0"
