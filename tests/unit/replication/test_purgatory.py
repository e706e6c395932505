"""The purgatory's watches: checks run inside ``notify`` until satisfied, or once at the
deadline, and leave nothing registered behind them."""

from __future__ import annotations

from collections.abc import Callable

from moldau.clock import ManualScheduler
from moldau.replication.purgatory import Purgatory


def purgatory() -> tuple[Purgatory, ManualScheduler]:
    scheduler = ManualScheduler()
    scheduler.clock.advance(1_000)
    return Purgatory(scheduler), scheduler


def test_a_watch_is_checked_at_each_notify_until_satisfied() -> None:
    p, scheduler = purgatory()
    calls: list[bool] = []
    needed = [3]

    def check(expired: bool) -> bool:
        calls.append(expired)
        needed[0] -= 1
        return needed[0] == 0

    p.watch(["a", "b"], 2_000, check)
    p.notify("c")
    assert calls == []
    p.notify("a")
    p.notify("a")
    assert calls == [False, False] and p.watched() == 2
    p.notify("b")
    assert calls == [False, False, False]
    assert p.watched() == 0  # gone from both keys
    scheduler.advance(5_000)
    p.notify("a")
    assert calls == [False, False, False]  # neither the deadline nor a notify runs it again


def test_a_watch_not_satisfied_by_its_deadline_is_checked_once_expired() -> None:
    p, scheduler = purgatory()
    calls: list[bool] = []
    p.watch(["a"], 1_500, lambda expired: calls.append(expired) or expired)
    scheduler.advance(499)
    assert calls == []
    scheduler.advance(1)
    assert calls == [True] and p.watched() == 0
    p.notify("a")
    assert calls == [True]


def test_a_watch_whose_deadline_has_passed_is_checked_expired_at_once() -> None:
    p, _ = purgatory()
    calls: list[bool] = []
    p.watch(["a"], 1_000, lambda expired: calls.append(expired) or True)
    assert calls == [True] and p.watched() == 0


def test_watch_deadlines_share_one_timer_and_expire_in_order() -> None:
    """Deadlines are kept in one heap under a single armed timer: a later watch with an
    earlier deadline still expires first, and finished watches never expire."""
    p, scheduler = purgatory()
    expired: list[int] = []

    def waiting(n: int) -> Callable[[bool], bool]:
        def check(is_expired: bool) -> bool:
            if is_expired:
                expired.append(n)
            return not is_expired and n % 10 != 0  # every tenth one never satisfied

        return check

    for n in range(200):
        p.watch([("k", n)], 3_000 + n, waiting(n))
    p.watch(["early"], 1_500, waiting(1_000))  # earlier than every one before it
    for n in range(200):
        p.notify(("k", n))  # satisfies all but every tenth
    assert len(scheduler._heap) <= 2  # one timer armed (and the one it replaced)
    scheduler.advance(600)
    assert expired == [1_000]
    scheduler.advance(2_000)
    assert expired == [1_000, *range(0, 200, 10)]
    assert p.watched() == 0
