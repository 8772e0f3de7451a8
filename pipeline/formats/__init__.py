"""worksurface.formats"""
