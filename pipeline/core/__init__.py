"""The ground floor: the message model, its serialization and digests, errors, configuration, token
counting and measured usage, sticky edits, view helpers, file I/O and artifact references.

Nothing here imports another floor of worksurface; everything else builds on it.
"""
