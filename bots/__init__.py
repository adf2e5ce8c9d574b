"""bots: the platform adapters (Telegram, Discord, console) and the `digest-bot` command."""


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("digest-bot")
    except PackageNotFoundError:
        from digest_core import __version__

        return __version__
