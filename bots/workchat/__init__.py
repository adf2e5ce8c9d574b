"""What the work chats share (Feishu, DingTalk, WeCom): their group webhooks' settings,
transport, signing, adapter and checks, and (in :mod:`bots.workchat.app`, with the callback
server and the SDK thread) what Feishu's and DingTalk's app bots share."""
