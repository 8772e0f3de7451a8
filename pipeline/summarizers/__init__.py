"""worksurface.summarizers"""
