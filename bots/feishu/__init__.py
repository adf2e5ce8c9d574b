"""Feishu/Lark: custom-bot group webhooks, and an app bot that answers readers."""
