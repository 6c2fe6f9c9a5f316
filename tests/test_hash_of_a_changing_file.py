"""A file whose size changes while it is hashed gives an error, never a git blob id of nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_deps.hashing import git_blob_id_of_file, sha256_of_file

# The kernel reports size 0 for /proc files, then serves their content: to the hash, the
# file changed size between the size it was given for the blob header and the end of the read.
GROWS_WHILE_READ = Path("/proc/self/status")


@pytest.mark.skipif(not GROWS_WHILE_READ.exists(), reason="needs Linux /proc")
def test_a_file_that_changed_size_is_an_oserror_naming_it() -> None:
    assert os.stat(GROWS_WHILE_READ).st_size == 0 and GROWS_WHILE_READ.read_bytes()
    with pytest.raises(OSError, match=r"^/proc/self/status: file changed size while it was being hashed$"):
        git_blob_id_of_file(GROWS_WHILE_READ)
    # A plain SHA-256 has no header to keep true: it hashes what it read.
    assert len(sha256_of_file(GROWS_WHILE_READ)) == 64
