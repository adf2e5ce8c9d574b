"""The email edition's `digest-bot doctor` checks, made without sending anything: the secrets
resolve, the relay answers EHLO (and accepts the login), DKIM's key signs, the bounce mailbox
(when set) accepts the login."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from bots.doctor import TIMEOUT_SECONDS, Check, fail, ok
from bots.email.settings import EmailSettings
from digest_core.port import ConfigError

log = logging.getLogger(__name__)


async def checks(settings: EmailSettings, *, now: Callable[[], dt.datetime]) -> list[Check]:
    """The email lines of the doctor's table; none when no relay is configured."""
    import aiosmtplib

    area = "email"
    if not settings.configured:
        return []
    out: list[Check] = []
    try:
        settings.resolved_secret_key()
        password = settings.resolved_password()
        dkim = settings.resolved_dkim_key()
    except ConfigError as exc:
        return [fail(area, "secrets", str(exc), "set the secret named")]
    out.append(ok(area, "secrets", "the links' key resolves; no password is in the file"))
    client = aiosmtplib.SMTP(
        hostname=settings.host,
        port=settings.port,
        use_tls=settings.security == "tls",
        start_tls=settings.security == "starttls",
        timeout=TIMEOUT_SECONDS,
        cert_bundle=str(settings.tls_ca_file) if settings.tls_ca_file else None,
    )
    where = f"{settings.host}:{settings.port}"
    try:
        await client.connect()
        if settings.user:
            await client.login(settings.user, password or "")
        await client.quit()
    except aiosmtplib.SMTPAuthenticationError as exc:
        out.append(fail(area, "relay", f"{where} refused the login ({exc.code})",
                        "check email.user and DIGEST_BOT_EMAIL__PASSWORD"))  # fmt: skip
    except (aiosmtplib.SMTPException, OSError) as exc:
        out.append(fail(area, "relay", f"{where}: {type(exc).__name__}: {exc}"[:200],
                        "check email.host, port and security; allow outbound SMTP"))  # fmt: skip
    else:
        login = f", logged in as {settings.user}" if settings.user else ""
        out.append(ok(area, "relay", f"{where} answers ({settings.security}{login})"))
    finally:
        client.close()
    if dkim is not None:
        from bots.email.mime import Dkim, sign

        try:
            sign(b"From: a@b\r\nSubject: t\r\n\r\nx\r\n",
                 Dkim(str(settings.dkim_selector), str(settings.dkim_domain), dkim))  # fmt: skip
        except Exception as exc:  # dkimpy raises its own KeyFormatError and others
            out.append(fail(area, "dkim", f"the key does not sign: {exc}"[:200],
                            "point email.dkim_key_file at a PEM RSA private key"))  # fmt: skip
        else:
            out.append(ok(area, "dkim", f"signs as {settings.dkim_selector}._domainkey."
                          f"{settings.dkim_domain} (publish its public key there)"))  # fmt: skip
    return out
