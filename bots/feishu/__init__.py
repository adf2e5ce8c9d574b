"""Feishu/Lark custom bot: a send-only group webhook platform."""
