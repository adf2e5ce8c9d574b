"""The archive: the dated issue files of a folder — listing, adding, scanning, the search index,
files still being saved, and the template `digest-bot new` writes."""

from digest_core.archive.folder import (
    Archive,
    ArchiveEntry,
    SearchHit,
    nearest_text,
)

__all__ = [
    "Archive",
    "ArchiveEntry",
    "SearchHit",
    "nearest_text",
]
