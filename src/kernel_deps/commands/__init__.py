"""The commands, one module per verb, each a library function returning a typed report.

``kernels lock`` is :func:`kernel_deps.commands.lock.lock_project`, ``add`` and ``remove``
:mod:`kernel_deps.commands.edit`, ``export`` :mod:`kernel_deps.commands.export`, ``download``,
``verify``, ``tree``, ``outdated`` and ``versions`` the modules of those names. A report's
``to_json()`` is the document ``kernels COMMAND --json`` prints (docs/schemas/); the CLI
renders its text from the same report.
"""
