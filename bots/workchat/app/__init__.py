"""What the work chats' app bots share (Feishu's, DingTalk's): the API client's base (api.py),
the app bot over its webhook adapter (bot.py), the handlers' base (handlers.py) and the doctor's
checks (doctor.py)."""
