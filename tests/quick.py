"""How hard the property tests search: every example in ``make test``, a tenth in ``make check``.

``make check`` sets ``TESTS_QUICK=1``; then Hypothesis's default profile is ``quick`` (10
examples) and a test's own ``max_examples=examples(n)`` asks for ``n // 10`` (at least 10).
"""

import os

from hypothesis import HealthCheck, settings

QUICK = os.environ.get("TESTS_QUICK") == "1"

#: few examples, and no complaint that a busy machine draws them slowly
settings.register_profile(
    "quick", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
if QUICK:
    settings.load_profile("quick")


def examples(n: int) -> int:
    """``n`` examples, or a tenth of them (at least 10) in the quick inner loop."""
    return max(10, n // 10) if QUICK else n
