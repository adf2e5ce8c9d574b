"""The running bot: its composition root (DigestService) and the parts it wires: posting,
alerts, status, the admin backend, the dashboard, engagement, the port over it (reception),
leadership and the terminal's greeting."""
