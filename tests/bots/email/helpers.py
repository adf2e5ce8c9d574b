"""Shared set-up of the email tests: a DKIM key pair made with openssl, the adapter's settings,
the adapter as its spec builds it."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from bots.email.adapter import EmailAdapter
from bots.email.settings import EmailSettings
from bots.email.spec import PLATFORM
from digest_core.clock import Clock

SENDER = "digest@example.org"
SECRET = "a-test-secret-of-enough-length-0123"


def dkim_keys(tmp_path: Path) -> tuple[Path, bytes]:
    """(the private key's PEM file, the DNS TXT record of its public key)."""
    key = tmp_path / "dkim.pem"
    subprocess.run(
        ["openssl", "genrsa", "-traditional", "-out", str(key), "1024"],
        check=True,
        capture_output=True,
    )
    der = subprocess.run(
        ["openssl", "rsa", "-in", str(key), "-pubout", "-outform", "DER"],
        check=True,
        capture_output=True,
    ).stdout
    return key, b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)


def settings(tmp_path: Path, port: int, *, dkim_key: Path | None = None) -> EmailSettings:
    extra = (
        {"dkim_selector": "s1", "dkim_domain": "example.org", "dkim_key_file": dkim_key}
        if dkim_key
        else {}
    )
    return EmailSettings.model_validate(
        {
            "host": "127.0.0.1",
            "port": port,
            "security": "none",
            "from": f"AI 技术日报 <{SENDER}>",
            "reply_to": "editor@example.org",
            "public_url": "https://digest.example.org/",
            "secret_key": SECRET,
            "address_book": tmp_path / "readers.sqlite3",
            **extra,
        }
    )


def adapter_for(section: EmailSettings, *, clock: Clock) -> EmailAdapter:
    """The adapter of ``section``, paced as the spec states for it (the relay's rate)."""
    return EmailAdapter(section, clock=clock, limits=PLATFORM.pacing(section))
