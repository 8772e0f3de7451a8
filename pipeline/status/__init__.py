"""worksurface.status"""
