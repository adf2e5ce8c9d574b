"""The archive: the dated issue files of a folder — listing, adding, scanning, the persistent
search index, files still being saved, and the template `digest-bot new` writes."""

from digest_core.archive.folder import (
    Archive,
    ArchiveEntry,
    SearchHit,
    nearest_text,
)
from digest_core.archive.searching import index_for

__all__ = [
    "Archive",
    "ArchiveEntry",
    "SearchHit",
    "index_for",
    "nearest_text",
]
