"""Batch evaluation over many transcripts on Dask (`worksurface batch`)."""
