"""`python -m bots.cli`: the digest-bot command."""

from bots.cli import main

raise SystemExit(main())
