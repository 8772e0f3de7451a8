"""worksurface.integrations"""
