"""A throwaway Dovecot IMAP server on loopback for the bounce mailbox's tests (Debian's
``dovecot-imapd``, started in the foreground with its own configuration in a temporary folder,
like tests/pg.py starts PostgreSQL). One user, ``bounces``, with a plain password; its mail is
a Maildir that tests fill by writing files into ``new/``, as a delivery agent does.

Dovecot refuses to run a mail user as root: the Maildir belongs to ``nobody``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import ports

DOVECOT = os.environ.get("DIGEST_BOT_DOVECOT", "/usr/sbin/dovecot")
USER = "bounces"
PASSWORD = "bounce-box-password"


@dataclass
class Mailbox:
    host: str
    port: int
    maildir: Path

    def deliver(self, raw: bytes) -> None:
        """Put one mail into the inbox (Maildir ``new/``), as the mail user owns it."""
        owner = pwd.getpwnam("nobody")
        name = f"{time.time():.6f}.{uuid.uuid4().hex}.test"
        tmp = self.maildir / "tmp" / name
        tmp.write_bytes(raw)
        os.chown(tmp, owner.pw_uid, owner.pw_gid)
        tmp.rename(self.maildir / "new" / name)

    def count(self) -> int:
        return sum(1 for d in ("new", "cur") for _ in (self.maildir / d).iterdir())


def _free_port() -> int:
    return ports.free_port()


@contextmanager
def dovecot() -> Iterator[Mailbox]:
    """A running Dovecot serving one Maildir in a folder of its own; stopped and removed after.

    (Not under pytest's tmp_path: that is private to root, and Dovecot's own processes, which
    run as its users, must read the configuration and the password file.)"""
    if not Path(DOVECOT).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{DOVECOT} is missing: apt-get install dovecot-imapd")
        pytest.skip(f"{DOVECOT} is missing (apt-get install dovecot-imapd)")
    owner = pwd.getpwnam("nobody")
    port = _free_port()
    root = Path(tempfile.mkdtemp(prefix="digest-bot-imap-"))
    for sub in ("run", "state"):
        (root / sub).mkdir(parents=True)
    maildir = root / "home" / USER / "Maildir"
    for sub in ("new", "cur", "tmp"):
        (maildir / sub).mkdir(parents=True)
    for path in (root / "home", root / "home" / USER, maildir, *maildir.iterdir()):
        os.chown(path, owner.pw_uid, owner.pw_gid)
    (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    os.chmod(root / "passwd", 0o644)
    (root / "dovecot.conf").write_text(
        f"""protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = dovecot
default_login_user = dovenull
mail_location = maildir:{maildir}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={owner.pw_uid} gid={owner.pw_gid} home={root}/home/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
"""
    )
    os.chmod(root, 0o755)
    proc = subprocess.Popen(
        [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # until it accepts connections
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = root / "dovecot.log"
                    raise RuntimeError(
                        "dovecot did not start: "
                        + (log.read_text() if log.exists() else "")
                        + (proc.stderr.read().decode() if proc.stderr else "")
                    ) from None
                time.sleep(0.05)
        yield Mailbox("127.0.0.1", port, maildir)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
