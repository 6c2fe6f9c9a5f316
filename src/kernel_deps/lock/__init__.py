"""The lock: its model, the one reader, other tools' lock formats, and whether it is in sync."""
