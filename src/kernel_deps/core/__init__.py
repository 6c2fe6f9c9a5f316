"""Foundations every layer shares: errors, settings, parsing, hashing, files, the machine, builds, requirements.

Nothing here imports another layer of kernel_deps.
"""
