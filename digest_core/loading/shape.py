"""The shape a structured issue file (.json, .yaml) may have: how deep it nests, how long its
lists may be, and how a place inside it is named in messages; shared by the JSON and YAML
readers (:mod:`.structured`, :mod:`.yamlform`)."""

from __future__ import annotations

from digest_core.models import MAX_BRIEFS, MAX_LINKS, MAX_PARAGRAPHS, shorten

#: A location inside the data, as pydantic reports it: ``("briefs", 2, "links", 0)``.
Loc = tuple[str | int, ...]

#: How deeply lists and mappings may nest in an issue file. An issue needs 4 levels (issue,
#: briefs, item, links); the cap keeps hostile files far from Python's recursion limit.
MAX_NESTING = 32


#: The model's caps on lists, by field name, for checking YAML while it is read.
LIST_CAPS: dict[str, int] = {
    "briefs": MAX_BRIEFS,
    "paragraphs": MAX_PARAGRAPHS,
    "links": MAX_LINKS,
}
#: Any other list (which the schema refuses anyway) stops at the largest cap.
MAX_LIST = max(LIST_CAPS.values())


def format_loc(loc: Loc) -> str:
    """``("briefs", 2, "links", 0)`` -> ``briefs.2.links.0`` (the field path used in messages);
    a key from the file is shortened and escaped, as it may hold anything."""
    return ".".join(shorten(str(part), 40) for part in loc) or "(top level)"


def too_deep() -> str:
    return (
        f"nested too deeply: lists and mappings may nest at most {MAX_NESTING} levels "
        "(an issue needs 4)"
    )
