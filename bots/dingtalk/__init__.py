"""DingTalk: custom-robot group webhooks, and an app robot that answers readers."""
