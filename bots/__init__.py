"""bots: the platform adapters (Telegram, Discord, console) and the `digest-bot` command."""
