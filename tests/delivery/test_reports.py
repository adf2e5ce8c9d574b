"""A delivery's report answers the same, tallied once or summed at each question."""

import datetime as dt

from digest_core.delivery import DeliveryReport, TargetReport
from digest_core.testing import make_issue, make_targets

DUE = dt.datetime(2026, 12, 2, 8, tzinfo=dt.UTC)


def _report(offset: int) -> DeliveryReport:
    one, two, three = make_targets(3, platform="fake")
    targets = [
        TargetReport(one, sent=2, maybe_twice=1),
        TargetReport(two, sent=1, failed=1, unknown=1, waiting=1, due=DUE + dt.timedelta(offset)),
        TargetReport(three, gone=True, skipped=1),
    ]
    return DeliveryReport(make_issue().ref, "fake", 1, 1, targets, [])


def _answers(r: DeliveryReport) -> tuple[object, ...]:
    return (r.sent, r.failed, r.gone, r.in_progress, r.unknown, r.waiting, r.due,
            r.maybe_twice, r.ok)  # fmt: skip


async def test_tallied_and_merged_reports_answer_as_summed_ones() -> None:
    plain = _answers(_report(1))
    assert plain == (3, 2, [make_targets(3, platform="fake")[2]], 0, 1, 1,
                     DUE + dt.timedelta(1), 1, False)  # fmt: skip
    assert _answers(await _report(1).tally(every=2)) == plain
    summed = _report(1).merged(_report(0))
    tallied = (await _report(1).tally()).merged(await _report(0).tally())
    assert _answers(tallied) == _answers(summed)
    assert tallied.due == DUE
