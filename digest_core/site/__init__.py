"""The web archive: static pages, a search index and an Atom feed built from published issues.

``links`` (permalinks) and ``published`` (the embargo rule) need nothing beyond the standard
library, so renderers may import them; ``build`` needs the ``site`` extra (Jinja2, feedgen).
"""
