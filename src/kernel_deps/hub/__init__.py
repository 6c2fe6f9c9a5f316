"""The Hugging Face Hub: the one transport, the REST client and the per-run view a resolution reads.

Only this package imports huggingface_hub, and only it touches the network.
"""
