"""worksurface.facts"""
