"""The project: pyproject.toml read and edited, one edit of a project at a time."""
