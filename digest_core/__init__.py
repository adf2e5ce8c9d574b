"""digest_core: the platform-neutral core of digest-bot (models, loading, rendering, delivery).

Importing this package MUST NOT import a chat SDK (telegram, discord); a test checks it.
"""

__version__ = "0.1.0"
