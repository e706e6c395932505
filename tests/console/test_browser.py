"""The console in a real browser (Chromium via Playwright) against a live Moldau broker:
what a person sees must be what the cluster holds."""

from __future__ import annotations

import html
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from playwright.sync_api import Page, expect

from tests.console.conftest import SAMPLE_INTERVAL_S, Console
from tests.integration.helpers import alter_group_config, wait_until

TIMEOUT_S = 30


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, list]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for key, value, headers in records:
        producer.produce(
            topic,
            value,
            key,
            headers=headers or None,
            on_delivery=lambda e, _m: e and errors.append(e),
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    """A group member that reads `count` records, commits exactly those, and leaves."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < count and time.monotonic() < deadline:
        for message in consumer.consume(count - got, timeout=1):
            assert message.error() is None
            got += 1
    assert got == count
    consumer.commit(asynchronous=False)
    consumer.close()


def lag_from_offsets(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, int | None]:
    """Lag per partition computed independently: high watermark minus committed offset
    (None where the group committed nothing)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT_S
        )
        lag = {}
        for tp in committed:
            _, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
            lag[tp.partition] = high - tp.offset if tp.offset >= 0 else None
        return lag
    finally:
        consumer.close()


def _number(text: str) -> int | None:
    """A table cell's number; '–' (nothing committed) is None."""
    return None if text.strip() == "–" else int(text.replace(",", ""))


def cells(page: Page, row_selector: str) -> list[list[str]]:
    return [
        [c.strip() for c in row.locator("td").all_inner_texts()]
        for row in page.locator(row_selector).all()
    ]


# --- pages render ---------------------------------------------------------------------------


def test_pages_render_cluster_facts(page: Page, console: Console, broker, admin: AdminClient):
    create_topic(admin, "render-topic", 2)
    produce(broker.bootstrap, "render-topic", [(b"k", b"v%d" % i, []) for i in range(7)])
    cluster = admin.describe_cluster().result()

    response = page.goto(console.page_url("/"))
    assert response is not None and response.status == 200
    expect(page.locator("h1")).to_have_text("Cluster overview")
    expect(page.locator("#cluster-id")).to_have_text(cluster.cluster_id)
    expect(page.locator("#controller")).to_have_text(str(cluster.controller.id))
    [row] = cells(page, "#brokers tbody tr")
    assert row[:3] == [str(cluster.nodes[0].id), broker.host, str(broker.port)]
    assert row[-1] == "controller"
    # A single node is a KRaft quorum of one.
    [voter] = cells(page, "#quorum tbody tr")
    assert voter[:2] == [str(cluster.controller.id), "leader"] and voter[3] == "0"

    page.goto(console.page_url("/topics"))
    row = page.locator("#topic-table tr[data-topic='render-topic'] td")
    expect(row.nth(1)).to_have_text("2")  # partitions
    expect(row.nth(3)).to_have_text("7")  # messages
    # The filter narrows the list in place (htmx), without a page load.
    page.fill("input[name=q]", "no-such-topic-xyz")
    expect(page.locator("#topic-table td.empty")).to_contain_text("no-such-topic-xyz")

    page.goto(console.page_url("/topics/render-topic"))
    partitions = cells(page, "#partitions tbody tr")
    assert [r[0] for r in partitions] == ["0", "1"]
    assert sum(int(r[6]) for r in partitions) == 7
    for r in partitions:
        assert r[1] == str(cluster.nodes[0].id)  # leader

    page.goto(console.page_url("/topics/render-topic/configs"))
    expect(page.locator("#configs tr[data-config='cleanup.policy'] .config-value")).to_have_text(
        "delete"
    )

    for path in ("/groups", "/topics/render-topic/messages"):
        response = page.goto(console.page_url(path))
        assert response is not None and response.status == 200, path

    response = page.goto(console.page_url("/topics/no-such-topic"))
    assert response is not None and response.status == 404
    expect(page.locator("#error-message")).to_contain_text("UNKNOWN_TOPIC_OR_PART")


# --- messages -------------------------------------------------------------------------------


def test_produced_record_appears_in_browser(page: Page, console: Console, broker, admin):
    create_topic(admin, "browse-topic", 3)
    order = {"id": 42, "customer": "ada", "items": ["tea", "cake"]}
    produce(
        broker.bootstrap,
        "browse-topic",
        [(b"order-42", json.dumps(order).encode(), [("origin", b"test"), ("n", b"1")])],
    )
    page.goto(console.page_url("/topics/browse-topic/messages"))
    row = page.locator("#records tr.record")
    expect(row).to_have_count(1)
    expect(row.locator("td.key")).to_have_text("order-42")
    value = row.locator("td.value")
    expect(value.locator(".kind")).to_have_text("json")
    value.locator("summary").click()
    assert json.loads(value.locator("pre").inner_text()) == order
    expect(row.locator("td.headers")).to_contain_text("origin test")
    expect(row.locator("td.headers")).to_contain_text("n 1")

    # The same record as hex, found by its partition and offset.
    partition, offset = row.get_attribute("data-partition"), row.get_attribute("data-offset")
    page.select_option("select[name=partition]", partition)
    page.select_option("select[name=start]", "offset")
    page.fill("input[name=from]", offset)
    page.select_option("select[name=format]", "hex")
    page.click("#browse button[type=submit]")
    expect(page.locator("#records tr.record td.key")).to_contain_text(b"order-42".hex(" "))


def test_live_tail_shows_new_records(page: Page, console: Console, broker, admin):
    create_topic(admin, "tail-topic", 2)
    produce(broker.bootstrap, "tail-topic", [(b"old", b"before the tail", [])])
    page.goto(console.page_url("/topics/tail-topic/messages"))
    expect(page.locator("#records tr.record")).to_have_count(1)
    page.click("#tail-toggle")
    expect(page.locator("#tail-indicator")).to_be_visible()
    page.wait_for_timeout(1500)  # a poll or two with nothing new
    produce(
        broker.bootstrap, "tail-topic", [(b"new-%d" % i, b"tailed %d" % i, []) for i in range(3)]
    )
    rows = page.locator("#records tr.record")
    expect(rows).to_have_count(4, timeout=TIMEOUT_S * 1000)
    keys = sorted(rows.locator("td.key").all_inner_texts())
    assert keys == ["new-0", "new-1", "new-2", "old"]
    # Polling again brings nothing twice.
    page.wait_for_timeout(2500)
    expect(rows).to_have_count(4)


def test_produce_from_ui(page: Page, console: Console, broker, admin):
    create_topic(admin, "ui-produce", 2)
    page.goto(console.page_url("/topics/ui-produce/messages"))
    page.click("#produce-box summary")
    page.fill("#produce input[name=key]", "ui-key")
    page.fill("#produce input[name=partition]", "1")
    page.fill("#produce textarea[name=value]", "from the browser ✓")
    page.fill("#produce textarea[name=headers]", "via=console")
    page.click("#produce button[type=submit]")
    expect(page.locator(".flash.notice")).to_contain_text("partition 1 at offset 0")

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify-ui-produce"})
    consumer.assign([TopicPartition("ui-produce", 1, 0)])
    [message] = consumer.consume(1, timeout=TIMEOUT_S)
    consumer.close()
    assert message.error() is None
    assert (message.key(), message.value().decode(), message.headers()) == (
        b"ui-key",
        "from the browser ✓",
        [("via", b"console")],
    )


# --- topic administration -------------------------------------------------------------------


def test_create_topic_from_ui(page: Page, console: Console, admin: AdminClient):
    page.goto(console.page_url("/topics"))
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill("made-in-browser")
    form.locator("input[name=partitions]").fill("4")
    form.locator("textarea[name=configs]").fill("retention.ms=123456\ncleanup.policy=compact")
    form.locator("button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"/topics/made-in-browser\?notice="))
    expect(page.locator(".flash.notice")).to_have_text("Created topic made-in-browser.")

    meta = admin.list_topics("made-in-browser", timeout=TIMEOUT_S).topics["made-in-browser"]
    assert meta.error is None and len(meta.partitions) == 4
    resource = ConfigResource(ResourceType.TOPIC, "made-in-browser")
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["retention.ms"].value == "123456"
    assert configs["cleanup.policy"].value == "compact"

    # Creating it again is refused with Kafka's error, shown on the page.
    page.goto(console.page_url("/topics"))
    form.locator("input[name=name]").fill("made-in-browser")
    form.locator("button[type=submit]").click()
    expect(page.locator(".flash.error")).to_contain_text("TOPIC_ALREADY_EXISTS")


def test_alter_and_delete_topic_from_ui(page: Page, console: Console, admin: AdminClient):
    create_topic(admin, "ui-alter", 2)
    page.goto(console.page_url("/topics/ui-alter"))
    page.fill("#add-partitions input[name=partitions]", "5")
    page.click("#add-partitions button")
    expect(page.locator(".flash.notice")).to_contain_text("now has 5 partitions")
    expect(page.locator("#partitions tbody tr")).to_have_count(5)
    assert len(admin.list_topics("ui-alter", timeout=TIMEOUT_S).topics["ui-alter"].partitions) == 5

    page.goto(console.page_url("/topics/ui-alter/configs"))
    page.fill("#set-configs textarea[name=set]", "retention.ms=98765")
    page.click("#set-configs button")
    expect(page.locator(".flash.notice")).to_contain_text("retention.ms")
    override = page.locator("#configs tr.override[data-config='retention.ms']")
    expect(override.locator(".config-value")).to_have_text("98765")
    resource = ConfigResource(ResourceType.TOPIC, "ui-alter")
    assert admin.describe_configs([resource])[resource].result()["retention.ms"].value == "98765"

    override.locator("button").click()  # reset to default
    expect(page.locator("#configs tr.override[data-config='retention.ms']")).to_have_count(0)
    assert admin.describe_configs([resource])[resource].result()["retention.ms"].value != "98765"

    page.goto(console.page_url("/topics/ui-alter"))
    page.click("#delete-topic button")  # the confirm() dialog is accepted by the fixture
    expect(page.locator(".flash.notice")).to_have_text("Deleted topic ui-alter.")
    assert "ui-alter" not in admin.list_topics(timeout=TIMEOUT_S).topics


# --- consumer groups ------------------------------------------------------------------------


def test_lag_shown_equals_lag_from_offsets(page: Page, console: Console, broker, admin):
    topic, group = "lag-topic", "lag-group"
    create_topic(admin, topic, 3)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, []) for i in range(90)])
    consume_and_commit(broker.bootstrap, group, topic, 40)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"more%d" % i, []) for i in range(15)])
    expected = lag_from_offsets(broker.bootstrap, group, topic, 3)
    total = sum(lag for lag in expected.values() if lag is not None)
    assert total > 0

    page.goto(console.page_url(f"/groups/{group}"))
    shown = {
        int(row.get_attribute("data-partition")): _number(row.locator("td.lag").inner_text())
        for row in page.locator("#offsets tbody tr").all()
    }
    # Like kafka-consumer-groups, partitions the group never committed to (nor owns) are not listed.
    assert shown == {p: lag for p, lag in expected.items() if lag is not None}
    expect(page.locator(".stat .stat-value").nth(3)).to_have_text(str(total))

    page.goto(console.page_url("/groups"))
    expect(page.locator(f"#groups tr[data-group='{group}'] td.lag")).to_have_text(str(total))

    # The lag chart's newest point is the same number, sampled over time.
    page.goto(console.page_url(f"/groups/{group}"))
    series = page.locator(f".chart g.series[data-series='{topic}']")
    expect(series).to_have_attribute("data-last", str(total), timeout=TIMEOUT_S * 1000)


def test_share_group_listed_with_type_start_offset_and_lag(
    page: Page, console: Console, broker, admin
):
    topic, group = "share-topic", "share-group"
    create_topic(admin, topic, 1)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, []) for i in range(10)])
    alter_group_config(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[int] = []
    try:
        wait_until(
            lambda: (
                bool(got.extend(m.offset() for m in consumer.poll(0.5) if not m.error()))
                or len(got) >= 10
            ),
            "10 records",
        )
        consumer.commit_sync()  # acknowledges them: the start offset moves to 10
    finally:
        consumer.close()
    assert sorted(got) == list(range(10))
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"later%d" % i, []) for i in range(5)])

    page.goto(console.page_url("/groups"))
    row = page.locator(f"#groups tr[data-group='{group}']")
    expect(row.locator("td.type")).to_have_text("share")
    expect(row.locator("td.lag")).to_have_text("5")
    page.goto(console.page_url(f"/groups/{group}"))
    expect(page.locator("#offsets thead")).to_contain_text("Start offset")
    offsets = page.locator("#offsets tr[data-partition='0']")
    expect(offsets.locator("td.committed")).to_have_text("10")
    expect(offsets.locator("td.end")).to_have_text("15")
    expect(offsets.locator("td.lag")).to_have_text("5")
    expect(page.locator("#reset-offsets")).to_have_count(0)  # consumer-group offsets only


def test_a_consumer_groups_type_and_target_assignment(page: Page, console: Console, broker, admin):
    """A KIP-848 group (group.protocol=consumer) is shown as such, with each member's
    target assignment next to what it holds; a classic group has no target column."""
    topic, group = "kip848-topic", "kip848-group"
    create_topic(admin, topic, 2)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer"}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "the member got no assignment"
            consumer.poll(0.2)
        page.goto(console.page_url("/groups"))
        expect(page.locator(f"#groups tr[data-group='{group}'] td.type")).to_have_text("consumer")
        page.goto(console.page_url(f"/groups/{group}"))
        expect(page.locator("#group-type")).to_have_text("consumer")
        row = page.locator("#members tbody tr")
        expect(row.locator("td.assignment .chip")).to_have_text([f"{topic}-0", f"{topic}-1"])
        expect(row.locator("td.target .chip")).to_have_text([f"{topic}-0", f"{topic}-1"])
    finally:
        consumer.close()
    produce(broker.bootstrap, topic, [(None, b"v%d" % i, []) for i in range(2)])
    consume_and_commit(broker.bootstrap, "classic-group", topic, 2)
    page.goto(console.page_url("/groups"))
    expect(page.locator("#groups tr[data-group='classic-group'] td.type")).to_have_text("classic")


def test_reset_offsets_and_delete_group_from_ui(page: Page, console: Console, broker, admin):
    topic, group = "reset-topic", "reset-group"
    create_topic(admin, topic, 2)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"v", []) for i in range(20)])
    consume_and_commit(broker.bootstrap, group, topic, 20)
    assert sum(lag_from_offsets(broker.bootstrap, group, topic, 2).values()) == 0

    page.goto(console.page_url(f"/groups/{group}"))
    form = page.locator("#reset-offsets")
    form.locator("select[name=topic]").select_option(topic)
    form.locator("select[name=strategy]").select_option("shift")
    form.locator("input[name=value]").fill("-3")
    form.locator("button").click()
    expect(page.locator(".flash.notice")).to_contain_text("Reset offsets of reset-group")
    assert lag_from_offsets(broker.bootstrap, group, topic, 2) == {0: 3, 1: 3}
    shown = [int(t) for t in page.locator("#offsets td.lag").all_inner_texts()]
    assert shown == [3, 3]

    form.locator("select[name=strategy]").select_option("earliest")
    form.locator("button").click()
    expect(page.locator(".flash.notice")).to_contain_text("→ 0")
    assert sum(lag_from_offsets(broker.bootstrap, group, topic, 2).values()) == 20

    page.click("#delete-group button")
    expect(page.locator(".flash.notice")).to_have_text(f"Deleted consumer group {group}.")
    groups = admin.list_consumer_groups().result().valid
    assert group not in [g.group_id for g in groups]


# --- charts ---------------------------------------------------------------------------------


def test_throughput_chart_samples_offsets(page: Page, console: Console, broker, admin):
    create_topic(admin, "chart-topic", 1)
    page.goto(console.page_url("/topics/chart-topic"))
    series = page.locator(".chart g.series[data-series='chart-topic']")
    expect(series).to_have_attribute("data-max", "0", timeout=TIMEOUT_S * 1000)
    started = time.monotonic()
    produce(broker.bootstrap, "chart-topic", [(None, b"x" * 10, []) for _ in range(500)])
    elapsed = time.monotonic() - started
    # The rate of the high watermark between two samples: at least the 500 records spread
    # over the production time plus two sample intervals.
    expect(series).not_to_have_attribute("data-max", "0", timeout=TIMEOUT_S * 1000)
    peak = float(series.get_attribute("data-max") or 0)
    assert peak >= 500 / (elapsed + 2 * SAMPLE_INTERVAL_S + 1) - 1e-9


# --- robustness -----------------------------------------------------------------------------


def test_bad_input_is_a_clear_error_not_a_crash(console: Console, admin: AdminClient):
    create_topic(admin, "bad-input", 1)
    cases = {
        "/topics/bad-input/messages?limit=lots": (400, "limit: expected a whole number"),
        "/topics/bad-input/messages?start=offset&from=-3": (400, "offset: must be at least 0"),
        "/topics/bad-input/messages?start=timestamp&from=soon": (400, "timestamp: expected"),
        "/topics/bad-input/messages?partition=x": (400, "partition: expected a whole number"),
        "/topics/bad-input/tail?pos=0:zero": (400, "pos: expected"),
        "/charts/throughput?kind=joules": (400, "kind: expected"),
        "/groups/no-such-group": (404, "GROUP_ID_NOT_FOUND"),
        "/topics/no-such-topic/messages": (404, "UNKNOWN_TOPIC_OR_PART"),
    }
    for path, (status, message) in cases.items():
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(console.page_url(path), timeout=TIMEOUT_S)
        body = caught.value.read().decode()
        assert caught.value.code == status, (path, body)
        assert message in html.unescape(body), (path, body)
    # A bad form post is answered with a redirect carrying the error, nothing is created.
    form = urllib.parse.urlencode({"name": "bad-form", "partitions": "0"}).encode()
    with urllib.request.urlopen(console.page_url("/topics"), data=form, timeout=TIMEOUT_S) as r:
        assert "partitions: must be at least 1" in html.unescape(r.read().decode())
    assert "bad-form" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_posts_from_other_origins_are_refused(console: Console, admin: AdminClient):
    """A page on another site cannot make the operator's browser delete a topic."""
    create_topic(admin, "csrf-target", 1)
    request = urllib.request.Request(
        console.page_url("/topics/csrf-target/delete"),
        data=b"",
        headers={"Origin": "http://evil.example"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=TIMEOUT_S)
    assert caught.value.code == 403
    assert "csrf-target" in admin.list_topics(timeout=TIMEOUT_S).topics
