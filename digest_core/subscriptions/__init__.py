"""Readers' own deliveries: their commands (/subscribe, /zone, /follow, /email, …), their
preferences as one form, and the issue at each reader's time and in their format."""
