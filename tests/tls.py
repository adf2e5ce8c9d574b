"""Every HTTP client of the test run trusts the system's CA folder, read lazily.

httpx builds an SSL context for each client it makes, and by default loads certifi's whole
bundle into it: about 17 ms of CPU a client, whether or not the client ever speaks TLS. The
suite makes thousands (every double's client, every bot process's python-telegram-bot and
work-chat clients) and talks TLS only to loopback servers that name their own CA file. With
``SSL_CERT_DIR`` (which httpx honours) OpenSSL looks a CA up in the folder when a handshake
needs it: 0.15 ms a context. Where either variable is set, or the folder has no hashed
certificates, nothing changes. The variable is inherited by xdist's workers and by every
process a test starts.
"""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_CA_FOLDER = Path("/etc/ssl/certs")


def use_system_ca_folder() -> None:
    """Set ``SSL_CERT_DIR`` to the system's CA folder, where that is possible."""
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return
    if not SYSTEM_CA_FOLDER.is_dir() or not any(SYSTEM_CA_FOLDER.glob("*.0")):
        return
    os.environ["SSL_CERT_DIR"] = str(SYSTEM_CA_FOLDER)
