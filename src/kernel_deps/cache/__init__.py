"""The cache: where kernels live on disk, placed atomically and verified file by file."""
