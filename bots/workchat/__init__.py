"""Shared pieces of the send-only work-chat webhooks (Feishu, DingTalk, WeCom)."""
