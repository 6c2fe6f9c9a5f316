"""Verify's checks: a lock held against its project, the cache, installed kernel wheels, this machine and the Hub.

The engine below ``kernels verify`` and ``kernels sync``: :mod:`~kernel_deps.checks.verification`
composes one verification of a project (:func:`~kernel_deps.checks.verification.verify_lock`,
its report and the kinds of problem it tells); :mod:`~kernel_deps.checks.cache` checks the
cache, the installed wheels and what this machine or a target needs, offline;
:mod:`~kernel_deps.checks.hub` asks the Hub, online only.
"""
