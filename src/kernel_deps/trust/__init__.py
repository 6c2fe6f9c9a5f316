"""Trust: who may sign a kernel and who did, metadata digests, Sigstore bundles verified
offline, each build's signature and digest judged, and publishers judged.

Given what to judge (the bytes, the listing, the policy), it asks nothing of the Hub or the
cache; the lock records its verdicts.
"""
