"""Fetching and placing: exactly the locked bytes, proven, in the Hugging Face cache.

The engine below ``kernels download``, ``kernels sync``, ``kernels to-wheel`` and the loader
(as pip's ``operations`` or uv's installer): :mod:`~kernel_deps.fetch.run` makes the chosen
variants present (:func:`~kernel_deps.fetch.run.download_lock`), :mod:`~kernel_deps.fetch.files`
fetches and verifies a missing variant's files, :mod:`~kernel_deps.fetch.gate` is the one way
they become loadable, :mod:`~kernel_deps.fetch.tasks` holds what a run works on, tells and
reports, and :mod:`~kernel_deps.fetch.project` is a project's download, its choice of variants
and ``--into``.

For each locked kernel and each chosen variant:

1. A variant already in the cache that recomputes to the locked hash costs no request.
2. Otherwise the Hub's tree listing of ``build/<variant>/`` at the locked commit must hash
   (``git_lfs_concat``) to the locked value before a byte is fetched: a rewritten repo is
   refused up front.
3. Every file is streamed to a private temporary path, hashed, and checked against the
   listing (LFS SHA-256 or git blob SHA-1, and size) before it becomes a blob.
4. Only when every file is verified is the variant folder linked and renamed into
   ``snapshots/<commit>/build/<variant>``.

A mismatch deletes what arrived and names the kernel, variant, file, expected and actual
hashes. Files of all variants of all kernels download concurrently.
"""
