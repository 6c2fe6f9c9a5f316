"""Resolution: which commit of each kernel the lock pins (the resolvelib provider and its candidates)."""
