"""worksurface.probes"""
