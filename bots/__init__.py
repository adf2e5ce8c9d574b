"""bots: the platforms (console, Telegram, Discord, email, Feishu, DingTalk, WeCom), the
`digest-bot` command and the running bot's composition (runtime, HTTP endpoint, dashboard)."""


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("digest-bot")
    except PackageNotFoundError:
        from digest_core import __version__

        return __version__
