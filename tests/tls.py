"""Every HTTP client of the test run trusts the system's CA folder, read lazily.

httpx builds an SSL context for each client it makes, and by default loads certifi's whole
bundle into it: about 17 ms of CPU a client, whether or not the client ever speaks TLS. The
suite makes thousands (every double's client, every bot process's python-telegram-bot and
work-chat clients) and talks TLS only to loopback servers that name their own CA file. With
``SSL_CERT_DIR`` (which httpx honours) OpenSSL looks a CA up in the folder when a handshake
needs it: 0.15 ms a context. ``SSL_CERT_FILE`` naming the system's own bundle (this machine's
shells set it beside ``SSL_CERT_DIR``, and httpx reads it first: the suite's clients loaded it
whole, 15 ms each, about 12 s of the xdist workers' CPU) is the same trust as the folder
(``update-ca-certificates`` writes both from the same certificates): it is dropped for the
folder. Any other choice already made is kept, as is everything where the folder has no
hashed certificates. The variables are inherited by xdist's workers and by every process a
test starts.
"""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_CA_FOLDER = Path("/etc/ssl/certs")
#: the bundle ``update-ca-certificates`` writes from that folder's certificates (Debian's)
SYSTEM_CA_BUNDLE = SYSTEM_CA_FOLDER / "ca-certificates.crt"


def use_system_ca_folder() -> None:
    """Set ``SSL_CERT_DIR`` to the system's CA folder, where that is possible, in place of an
    ``SSL_CERT_FILE`` that names the system's own bundle (set alone or beside the folder)."""
    chosen_file = os.environ.get("SSL_CERT_FILE")
    if chosen_file and Path(chosen_file) != SYSTEM_CA_BUNDLE:
        return
    chosen_folder = os.environ.get("SSL_CERT_DIR")
    if chosen_folder and Path(chosen_folder) != SYSTEM_CA_FOLDER:
        return
    if not SYSTEM_CA_FOLDER.is_dir() or not any(SYSTEM_CA_FOLDER.glob("*.0")):
        return
    os.environ.pop("SSL_CERT_FILE", None)  # httpx reads it before the folder
    os.environ["SSL_CERT_DIR"] = str(SYSTEM_CA_FOLDER)
