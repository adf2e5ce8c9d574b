"""The tests' own sample issues: editing the checkout's archive/ never breaks a test."""

from pathlib import Path

#: five sample issues, 2026-11-26 … 2026-11-30 (11-29 in English): copy them before changing any
SAMPLE_ARCHIVE = Path(__file__).resolve().parent / "sample_archive"
