"""The loader: a locked kernel imported from verified bytes only (load_kernel and its siblings).

Above the commands: a kernel not yet in the cache is fetched through them.
"""
