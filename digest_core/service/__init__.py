"""The running bot's composition root (DigestService), the port over it, leadership and the
terminal's greeting."""
