"""The email edition: the digest as a newsletter over SMTP."""
