"""DingTalk custom robot: a send-only group webhook platform."""
