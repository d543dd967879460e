# ruff: noqa: E501  (page text keeps Firecrawl's one-line paragraphs, so lines run long)
"""Writes `data/sample/crawl.json`: a small crawl of the fictional "Acme Queue" docs.

The sample is what `make demo` chunks and what tests use when they need every awkward form
Firecrawl produces without the shared corpus. All text is ours (about a made-up product);
only the *form* imitates real Firecrawl output: 2024 crawls (breadcrumb line, `[\\#](\\#slug)`
anchors, code flattened into lone-backtick lines with `_10` or `1`, `2`, ... markers, UI
debris) and 2026 crawls (absolute `[#](url#slug)` anchors, fenced code).

Run `python data/sample/make_sample.py` in the project venv. The output is
deterministic: rerunning it rewrites crawl.json byte for byte. The script also checks the
promises the README makes (the "over 1000 tokens" items really are) and prints a summary.
"""

from __future__ import annotations

import re
from pathlib import Path
from textwrap import dedent

from firechunk.atomic import write_json
from firechunk.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[2]

SITE = "https://docs.example.com"
OUT = Path(__file__).resolve().parent / "crawl.json"
RULE = "* * *"
HARD_LIMIT = 1000


# ---------------------------------------------------------------------------------------
# Building blocks that reproduce Firecrawl's output forms
# ---------------------------------------------------------------------------------------


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def heading_2024(level: int, title: str) -> str:
    """ATX heading as the 2024 crawls show it: escaped relative anchor link."""
    return f"{'#' * level} {title} [\\#](\\#{slug(title)})"


def heading_2026(level: int, title: str, path: str) -> str:
    """ATX heading as the 2026 crawls show it: absolute anchor link to the page."""
    return f"{'#' * level} {title} [#]({SITE}{path}#{slug(title)})"


def code(text: str) -> str:
    """Source code written as an indented triple-quoted string, without the outer newlines."""
    return dedent(text).strip("\n")


def flattened(source: str, style: str = "underscore") -> str:
    """Code the way Firecrawl flattens the docs' code widget.

    A lone backtick line opens and closes the block (two backticks when the code itself
    contains one). Every code line is preceded by a marker line: `_N` with N the block's line
    count (at least 10) in the "underscore" style, or the line number in the "numbered"
    style. An empty code line leaves its marker alone, so two markers follow each other.
    """
    lines = source.split("\n")
    fence = "``" if "`" in source else "`"
    out = [fence]
    for number, line in enumerate(lines, start=1):
        out.append(f"_{max(10, len(lines))}" if style == "underscore" else str(number))
        if line.strip():
            out.append(line)
    out.append(fence)
    return "\n".join(out)


def fenced(source: str, info: str = "", fence: str = "```") -> str:
    return f"{fence}{info}\n{source}\n{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def page(*blocks: str) -> str:
    """Blocks separated by one blank line, as Firecrawl joins them."""
    return "\n\n".join(blocks) + "\n"


def metadata_2024(path: str, title: str, description: str) -> dict:
    """Metadata in the key order and with the extra keys the 2024 crawls carry."""
    url = SITE + path
    return {
        "ogUrl": url,
        "title": f"{title} | Acme Docs",
        "robots": "index, follow",
        "ogTitle": f"{title} | Acme Docs",
        "language": "en",
        "sourceURL": url,
        "description": description,
        "modifiedTime": "2024-09-12T09:30:00.000Z",
        "ogDescription": description,
        "statusCode": 200,
        "url": url,
    }


def metadata_2026(path: str, title: str, description: str) -> dict:
    url = SITE + path
    return {
        "title": f"{title} | Acme Docs",
        "description": description,
        "language": "en",
        "sourceURL": url,
        "url": url,
        "statusCode": 200,
    }


# ---------------------------------------------------------------------------------------
# Page 1 (and its tracking-parameter twin): getting started, 2024 form
# ---------------------------------------------------------------------------------------

PUBLISH_JS = code("""
    import { createClient } from '@acme/queue'

    const acme = createClient(process.env.ACME_PROJECT_URL, process.env.ACME_SERVICE_KEY)

    const orderId = 'ord_1042'
    await acme.queue('orders').publish({
      body: `order ${orderId} was paid`,
      attributes: { source: 'checkout' },
    })
""")

WORKER_PY = code("""
    import os
    import signal

    from acme_queue import Client

    client = Client(os.environ["ACME_PROJECT_URL"], os.environ["ACME_SERVICE_KEY"])
    running = True


    def stop(signum, frame):
        global running
        running = False


    signal.signal(signal.SIGTERM, stop)

    while running:
        for message in client.queue("orders").receive(max_messages=10, wait_seconds=20):
            print("handling", message.id, message.body)
            message.ack()
""")

GETTING_STARTED_PATH = "/docs/guides/getting-started"


def getting_started() -> str:
    return page(
        "Guides",
        "# Getting started with Acme Queue",
        RULE,
        "Acme Queue is a hosted message queue for small teams. You create a queue, publish messages to it from any service, and consume them from workers that acknowledge each message once it has been handled. This guide takes you from an empty project to a worker that handles its first message in about ten minutes.",
        heading_2024(2, "Create a project"),
        "Sign in to the Acme console and choose **New project**. Pick a region close to the services that will publish messages: a queue lives in exactly one region and cannot be moved later. The console shows the two values your code needs once the project is ready.",
        "###### Project URL",
        "Loading...",
        "###### Service key",
        "Loading...",
        "Keep the service key on the server. It can publish to and read from every queue of the project, so it must never ship inside a browser bundle or a mobile app.",
        heading_2024(2, "Send and receive a message"),
        "PythonJavaScriptGo",
        "1",
        heading_2024(3, "Install the client library"),
        "The library is a thin wrapper around the HTTP API; it adds connection reuse, retries on network errors and typed messages.",
        "Terminal",
        flattened("pip install acme-queue"),
        "2",
        heading_2024(3, "Set the environment variables"),
        "Create a `.env` file next to your code and paste the values from the console:",
        ".env",
        flattened(
            "ACME_PROJECT_URL=https://<project-ref>.queue.example.com\nACME_SERVICE_KEY=<your-service-key>"
        ),
        "3",
        heading_2024(3, "Publish a message"),
        "Publishing returns once the message is stored on a majority of storage nodes. The body is any UTF-8 text up to 256 KiB; attributes are short key-value pairs that workers can filter on.",
        "ClientServer",
        "publish.js",
        flattened(PUBLISH_JS),
        "4",
        heading_2024(3, "Run a worker"),
        "A worker asks for a batch of messages, handles each one and acknowledges it. A message that is not acknowledged becomes visible again after its visibility timeout, so a crashed worker never loses work.",
        "worker.py",
        flattened(WORKER_PY),
        RULE,
        heading_2024(2, "Next steps"),
        "- Read [how delivery works](/docs/guides/architecture) before you rely on ordering.\n- Decide what happens to messages that keep failing: [retries and dead-letter queues](/docs/guides/queues/retries).\n- Check the [quotas and limits](/docs/reference/limits) of your plan.",
    )


# ---------------------------------------------------------------------------------------
# Page 2: retries, 2026 form (fenced code with info strings, tables, nested lists)
# ---------------------------------------------------------------------------------------

RETRIES_PATH = "/docs/guides/queues/retries"

RETRY_TS = code("""
    import { createClient } from '@acme/queue'

    const acme = createClient(process.env.ACME_PROJECT_URL!, process.env.ACME_SERVICE_KEY!)

    await acme.queues.update('orders', {
      retry: {
        policy: 'exponential',
        baseDelay: '2s',
        maxDelay: '5m',
        maxAttempts: 8,
      },
      deadLetterQueue: 'orders-dlq',
    })
""")

RETRY_PY = code("""
    from acme_queue import Client, RetryPolicy

    client = Client.from_env()
    client.queues.update(
        "orders",
        retry=RetryPolicy(policy="exponential", base_delay="2s", max_delay="5m", max_attempts=8),
        dead_letter_queue="orders-dlq",
    )
""")

DEAD_LETTERS_SQL = code("""
    -- Dead letters can also be read through the SQL interface.
    select id, attributes ->> 'acme.dlq.reason' as reason, failed_at
    from acme.dead_letters
    where queue = 'orders'
    order by failed_at desc
    limit 20;
""")


def retries() -> str:
    p = RETRIES_PATH
    return page(
        "# Retries and dead-letter queues",
        "Decide what happens when a worker fails to handle a message.",
        "When a worker does not acknowledge a message before its visibility timeout ends, Acme Queue makes the message visible again and another worker receives it. Each delivery counts as one attempt. The retry policy of a queue decides how long a failed message waits before its next attempt, and how many attempts it gets before it is moved aside.",
        heading_2026(2, "How attempts are counted", p),
        "1. A worker receives the message and its attempt counter goes up by one.\n2. The visibility timeout starts; no other worker can receive the message meanwhile.\n3. If the worker acknowledges the message, it is deleted and the counter no longer matters.\n4. If the worker calls `nack()` or the timeout ends, the message waits for the delay of the retry policy.\n5. Once the counter reaches `max_attempts`, the message goes to the dead-letter queue instead of back to the queue.",
        heading_2026(2, "Backoff policies", p),
        table(
            ["Policy", "Delay before attempt n", "Good for"],
            [
                ["`fixed`", "always `base_delay`", "downstream services that recover quickly"],
                ["`linear`", "`base_delay × (n - 1)`", "rate-limited APIs with a known window"],
                [
                    "`exponential`",
                    "`base_delay × 2^(n - 2)`, at most `max_delay`",
                    "outages of unknown length (the default)",
                ],
            ],
        ),
        "Set the policy when you create the queue or change it later; the new policy applies to the next attempt of every message already waiting.",
        fenced(RETRY_TS, "ts"),
        "The Python client takes the same settings:",
        fenced(RETRY_PY, "python", fence="~~~"),
        heading_2026(2, "Dead-letter queues", p),
        "- A dead-letter queue is an ordinary queue that receives the messages other queues gave up on.\n  - It keeps the original body and attributes of each message.\n  - It adds attributes that say why the message ended there:\n    - `acme.dlq.reason`: `max_attempts`, `expired` or `rejected`;\n    - `acme.dlq.attempts`: how many deliveries were made;\n    - `acme.dlq.source`: the queue the message came from.\n- You can send dead letters back to their queue once the cause is fixed:\n  - from the console, message by message;\n  - from the command line:\n    - `acme dlq replay orders-dlq --all` replays everything;\n    - `acme dlq replay orders-dlq --since 1h` replays the last hour only.",
        "Dead letters are kept for 14 days, like any unacknowledged message. Read them with SQL when you need to group failures by reason:",
        fenced(DEAD_LETTERS_SQL, "sql"),
        heading_2026(2, "Idempotent workers", p),
        "Retries mean that a worker can see the same message twice: once when its first attempt timed out after doing part of the work, and once on the retry. Make handlers idempotent by recording the message id together with the effect of the handler in the same database transaction, and skipping messages whose id is already recorded.",
    )


# ---------------------------------------------------------------------------------------
# Page 3: architecture, 2026 form, one H2 section of long prose (~2500 tokens)
# ---------------------------------------------------------------------------------------

ARCHITECTURE_PATH = "/docs/guides/architecture"

LIFE_OF_A_MESSAGE = [
    "Every message that passes through Acme Queue goes through the same four stages: it is accepted, stored, leased and finally settled. Knowing what happens at each stage explains most of the behaviour you will observe in production, from the latency of a publish call to the occasional message that a worker sees twice. This section follows a single message from the moment a service publishes it to the moment it disappears from the queue, and points out where each guarantee comes from and where it ends. None of it is needed to send your first message, but all of it matters the day something goes wrong.",
    "A publish request first reaches one of the front-end nodes of the region. The front end checks the service key, the size of the body (at most 256 KiB) and the number and length of the attributes, and rejects the request with a clear error code when any of them is out of bounds. It then assigns the message its identifier. Identifiers are time-ordered: their first part is the arrival time in milliseconds and their second part is a random number, so two messages published in the same millisecond still receive distinct identifiers, and sorting identifiers gives roughly the order of arrival. If the request carries an idempotency key, the front end also looks the key up in a short-lived table and, when it finds it, returns the identifier of the earlier message instead of storing a second copy.",
    "The front end does not answer the publisher yet. It forwards the message to the leader of the partition that will hold it, and the leader appends it to its log segment and sends it to two followers in other availability zones. As soon as one follower confirms that the message is on its disk, the message exists on two machines in two zones, and only then does the publisher receive its answer. Waiting for a majority rather than for all three copies keeps the latency of a publish close to the latency of the fastest follower, while still guaranteeing that the loss of any single machine, or of a whole zone, cannot lose an acknowledged message. The third copy usually arrives a few milliseconds later.",
    "Some messages are not meant to be delivered at once. A publish call may ask for a delay of up to fifteen minutes, and the message is then stored exactly like any other but written with a visibility time in the future. Until that time passes, the leader skips it when it builds a batch for a receive call, so a delayed message costs nothing while it waits and needs no separate scheduler. Delays longer than fifteen minutes are deliberately not supported: a queue is a poor calendar, and work planned hours or days ahead belongs in a table of your own that a periodic job turns into messages when the time comes. The same mechanism serves the retry policy, which simply rewrites the visibility time of a message after each failed attempt.",
    "A queue is split into partitions, and each partition is an independent log with its own leader. When a message carries an ordering key, the key is hashed to choose the partition, so all messages with the same key land in the same log and are delivered in the order they were accepted. Messages without a key are spread over the partitions in turn. There is no ordering between partitions: two messages with different keys can be delivered in either order, even if one was published long before the other. If your application needs every event of an order delivered in sequence, use the order identifier as the ordering key; if it needs a total order over the whole queue, you need a queue with a single partition, and you give up most of the throughput that partitions provide.",
    "Workers do not receive messages pushed at them; they ask for them. A receive call names a queue, the largest batch the worker is willing to take and how long it is prepared to wait when the queue is empty. The front end picks partitions that have visible messages and asks their leaders for a batch. A leader marks each message it hands out as leased: the message stays in the log but becomes invisible to other workers until the lease ends, and the leader records the deadline and a lease token in its lease table. The worker receives the messages together with their tokens, and every later operation on a message, whether it acknowledges, rejects or extends it, must present the token of the current lease.",
    "Batches exist to save round trips, not to group work. A worker that asks for ten messages may receive anything from one to ten, taken from one partition or several, and it is free to settle them one by one in any order. Receiving larger batches reduces the number of requests and raises the throughput of each worker, but it also means that each message waits inside the worker until the ones before it are handled, so the visibility timeout must cover the whole batch rather than a single message. When a receive call finds the queue empty, the front end holds it open for the waiting time the worker asked for and answers as soon as a message arrives; this long polling keeps idle workers from hammering the API with empty requests and keeps the delay between publish and delivery low.",
    "The length of a lease is the visibility timeout of the queue, thirty seconds unless you change it. Choosing it is a trade-off. A timeout shorter than the time a handler really needs means that messages become visible again while they are still being worked on, and a second worker starts the same job in parallel; the queue keeps working, but every slow message is handled twice. A timeout much longer than needed means that when a worker crashes, its messages stay invisible until their leases run out, and the delay before another worker picks them up grows accordingly. For handlers whose duration varies a lot, keep the timeout short and have the worker extend the lease of a message while it is still busy with it; the client libraries do this for you when you turn on automatic extension.",
    "A message is settled when the worker tells the queue what became of it. An acknowledgement deletes the message: the leader writes a small tombstone to the log, removes the lease and the message will never be delivered again. A negative acknowledgement ends the lease early and hands the message to the retry policy, which decides how long it waits before it becomes visible again. A lease that simply runs out is treated like a negative acknowledgement. In both cases the attempt counter of the message goes up, and once it reaches the limit of the policy the message moves to the dead-letter queue, if the queue has one, or is dropped and counted in the metrics if it has none.",
    "Taken together, these rules give at-least-once delivery. Every acknowledged publish will be delivered to some worker, and it will keep being delivered until a worker acknowledges it or its attempts run out, but nothing prevents it from being delivered more than once. A worker may finish its job and crash before its acknowledgement reaches the leader; a network partition may hide the acknowledgement until after the lease has expired; a publisher may retry a call whose answer was lost and store the message twice when it did not send an idempotency key. Exactly-once processing is possible, but only in your application: record the identifier of each handled message in the same transaction as the effect of the handler, and skip any message whose identifier you have already recorded.",
    "Failures inside the queue follow the same logic. When a partition leader stops answering, the remaining replicas elect a new leader among the followers that hold every acknowledged message. The new leader rebuilds its lease table from the log, and because leases are written to the log as well, a worker that holds a valid lease can usually settle its message on the new leader without noticing the change. Leases granted in the last moments before the failure may not have reached a follower; those messages become visible again as if their leases had expired, which is one more source of duplicate deliveries. During an election, which normally lasts a few seconds, publishes and receives on that partition wait and are retried by the client libraries; other partitions are not affected.",
    "Publishers are slowed down before they are turned away. Each project has a publish rate set by its plan, measured over a sliding window of one second. A project that goes over it first sees its publish calls take a little longer, because the front end queues them briefly instead of rejecting them; only when the excess lasts does it answer with the error `plan_throughput_limit` and a `Retry-After` header. The client libraries honour that header and retry on their own, so a short burst usually passes unnoticed. A sustained excess, on the other hand, turns into errors in the publishing service, and the right answer is then to batch messages, to spread the load over time, or to move to a plan whose rate matches the traffic.",
    "A region is the boundary of every guarantee described here. Storage nodes, partition leaders and front ends of a queue all live in the region chosen when the project was created, and nothing is copied to another region. A complete region outage therefore makes the queue unavailable until the region recovers; acknowledged messages are not lost, because they are on disk in several zones, but they cannot be published or received in the meantime. Applications that must keep working through a regional outage run two projects in two regions and publish each message to both, with the ordering key and idempotency key taken from the message itself, so that workers on either side can recognise and skip the copies they have already handled.",
    "Storage is reclaimed in the background. A log segment whose messages have all been settled is deleted as a whole; a segment that still holds a few unsettled messages among many settled ones is compacted, which means its live messages are copied to a new segment and the old one is removed. Unacknowledged messages are kept for fourteen days by default. After that they expire: they go to the dead-letter queue with the reason `expired`, or are dropped when there is none. The retention period can be raised on paid plans, but a queue that routinely holds messages for weeks is usually a sign that its workers cannot keep up, and more retention only hides the problem for longer.",
    "Deleting messages in bulk follows the same path as settling them. Purging a queue writes a single marker to the log of every partition, and every message older than the marker is treated as acknowledged from then on, even if a worker still holds a lease on it; that worker will see the error `message_not_found` when it tries to settle. Deleting a queue first purges it, then refuses new publishes and finally removes the partitions once their leases have ended. Both operations are final. If you may need the messages again, move them to another queue with the CLI before you purge, because there is no backup from which a purged message can be restored.",
    "Each stage exposes its own metrics, and reading them in order is the quickest way to find where a problem sits. Publish latency and publish errors describe the accepted and stored stages; a rise in latency with no rise in errors usually points at a slow zone. The age of the oldest visible message tells you whether workers keep up: it should stay close to zero, and a steady climb means that messages arrive faster than they are handled. Lease expiries and redeliveries describe the leased stage; a high rate of expiries with few errors in your own logs usually means the visibility timeout is too short for your handlers. Dead-lettered messages, finally, count the work that was given up on, and every one of them deserves a look.",
    "In short, Acme Queue promises that an acknowledged publish survives the loss of a machine or a zone, that messages with the same ordering key are delivered in order, and that every message is delivered at least once until a worker settles it. It does not promise delivery exactly once, ordering across keys, or that a message is handled within any fixed time. Design your workers around those three promises, make them idempotent, size the visibility timeout to your handlers and watch the age of the oldest message, and the queue will rarely be the part of your system you have to think about.",
]


def architecture() -> str:
    p = ARCHITECTURE_PATH
    return page(
        "# How delivery works",
        "What happens to a message between publish and acknowledgement.",
        "This page describes the internals that shape the guarantees of Acme Queue. Read it before you rely on ordering or design a worker that must not process a message twice.",
        heading_2026(2, "The life of a message", p),
        *LIFE_OF_A_MESSAGE,
        heading_2026(2, "Guarantees at a glance", p),
        table(
            ["Guarantee", "Scope", "Holds when"],
            [
                ["Durability", "acknowledged publishes", "one machine or one zone fails"],
                ["Ordering", "messages with the same ordering key", "always"],
                ["At-least-once delivery", "every stored message", "until settled or expired"],
            ],
        ),
        heading_2026(2, "Further reading", p),
        "- [Retries and dead-letter queues](/docs/guides/queues/retries)\n- [Quotas and limits](/docs/reference/limits)",
    )


# ---------------------------------------------------------------------------------------
# Page 4: reporting schema, 2026 form: a SQL block over 1000 tokens, an unclosed fence
# ---------------------------------------------------------------------------------------

SCHEMA_PATH = "/docs/reference/sql/reporting-schema"

MONTHS = [f"2025_{month:02d}" for month in range(1, 13)]


def monthly_partitions() -> str:
    """One partition per month of 2025, as a migration would list them."""
    statements = []
    for index, month in enumerate(MONTHS):
        year, number = month.split("_")
        start = f"{year}-{number}-01"
        end = "2026-01-01" if index == len(MONTHS) - 1 else f"{year}-{int(number) + 1:02d}-01"
        statements.append(
            f"create table reporting.deliveries_{month}\n"
            f"  partition of reporting.deliveries\n"
            f"  for values from ('{start}') to ('{end}');"
        )
    return "\n".join(statements)


REPORTING_MIGRATION = "\n".join(
    [
        code("""
            -- Reporting schema for Acme Queue: one row per delivery attempt, kept for a year.
            -- Apply with `acme sql apply reporting.sql`; every statement is idempotent.

            create schema if not exists reporting;

            create table if not exists reporting.queues (
              id           bigint generated always as identity primary key,
              project_ref  text        not null,
              name         text        not null,
              region       text        not null,
              created_at   timestamptz not null default now(),
              unique (project_ref, name)
            );

            create table if not exists reporting.deliveries (
              message_id   text        not null,
              queue_id     bigint      not null references reporting.queues (id),
              attempt      integer     not null check (attempt >= 1),
              leased_at    timestamptz not null,
              settled_at   timestamptz,
              outcome      text        check (outcome in ('ack', 'nack', 'expired', 'dead_letter')),
              worker       text,
              primary key (message_id, attempt, leased_at)
            ) partition by range (leased_at);
        """),
        "",
        monthly_partitions(),
        "",
        code("""
            create index if not exists deliveries_queue_time
              on reporting.deliveries (queue_id, leased_at desc);

            create index if not exists deliveries_open
              on reporting.deliveries (queue_id)
              where settled_at is null;

            -- How long each attempt held its lease, in seconds.
            create or replace view reporting.lease_durations as
            select
              d.queue_id,
              q.name as queue_name,
              d.message_id,
              d.attempt,
              extract(epoch from (d.settled_at - d.leased_at)) as seconds,
              d.outcome
            from reporting.deliveries d
            join reporting.queues q on q.id = d.queue_id
            where d.settled_at is not null;

            -- Daily figures per queue: attempts, acknowledgements and dead letters.
            create or replace view reporting.daily_outcomes as
            select
              queue_id,
              date_trunc('day', leased_at) as day,
              count(*)                                         as attempts,
              count(*) filter (where outcome = 'ack')          as acknowledged,
              count(*) filter (where outcome = 'nack')         as rejected,
              count(*) filter (where outcome = 'expired')      as expired,
              count(*) filter (where outcome = 'dead_letter')  as dead_lettered,
              percentile_cont(0.95) within group (
                order by extract(epoch from (settled_at - leased_at))
              ) as p95_seconds
            from reporting.deliveries
            group by queue_id, date_trunc('day', leased_at);

            -- Messages that needed more than one attempt, with their history.
            create or replace function reporting.retry_history(p_queue text, p_since interval)
            returns table (message_id text, attempts integer, outcomes text[])
            language sql
            stable
            as $$
              select d.message_id, max(d.attempt), array_agg(d.outcome order by d.attempt)
              from reporting.deliveries d
              join reporting.queues q on q.id = d.queue_id
              where q.name = p_queue
                and d.leased_at > now() - p_since
              group by d.message_id
              having max(d.attempt) > 1
              order by max(d.attempt) desc;
            $$;

            grant usage on schema reporting to reporting_reader;
            grant select on all tables in schema reporting to reporting_reader;
            grant execute on function reporting.retry_history(text, interval) to reporting_reader;
        """),
    ]
)

ROLLBACK_SQL = code("""
    -- Removes the reporting schema and everything in it.
    drop function if exists reporting.retry_history(text, interval);
    drop view if exists reporting.daily_outcomes;
    drop view if exists reporting.lease_durations;
    drop table if exists reporting.deliveries cascade;
    drop table if exists reporting.queues;
    drop schema if exists reporting;
""")


def reporting_schema() -> str:
    p = SCHEMA_PATH
    return page(
        "# Reporting schema",
        "Keep a year of delivery history in your own Postgres database.",
        "The reporting export writes one row per delivery attempt into a database you own, so you can join queue activity with your application data. This page lists the full migration that creates the schema.",
        heading_2026(2, "Overview", p),
        "The schema has two tables: `queues`, one row per queue, and `deliveries`, one row per attempt, partitioned by month so that old months can be dropped cheaply. Two views and one function answer the questions people ask most often.",
        heading_2026(2, "Full migration", p),
        "Save the migration as `reporting.sql` and apply it once per database:",
        fenced(REPORTING_MIGRATION, "sql"),
        "Add the partitions of the next year before it begins; the export stops with the error `no partition for row` when a month is missing.",
        heading_2026(2, "Rolling back", p),
        "To remove the schema and all its data, run:",
        # The page ends inside this block: the crawl cut the closing fence off.
        "```sql\n" + ROLLBACK_SQL,
    )


# ---------------------------------------------------------------------------------------
# Page 5: limits, 2026 form: a table over 1000 tokens
# ---------------------------------------------------------------------------------------

LIMITS_PATH = "/docs/reference/limits"

# One error code per line: code | HTTP status | meaning | what to do.
ERROR_CODES = [
    line.strip().split(" | ")
    for line in """
    `body_too_large` | 413 | The message body is larger than 256 KiB. | Store the payload in object storage and publish a reference to it.
    `too_many_attributes` | 400 | The message has more than 32 attributes. | Merge related attributes into one JSON-encoded value.
    `attribute_too_long` | 400 | An attribute name exceeds 128 bytes or a value exceeds 1 KiB. | Shorten the attribute or move it into the body.
    `invalid_attribute_name` | 400 | An attribute name starts with the reserved prefix `acme.`. | Rename the attribute.
    `queue_not_found` | 404 | No queue with this name exists in the project. | Check the spelling and the project URL.
    `queue_paused` | 409 | The queue is paused and accepts no publishes. | Resume the queue from the console or with `acme queue resume`.
    `queue_deleting` | 409 | The queue is being deleted. | Wait for the deletion to finish, then create it again.
    `queue_name_taken` | 409 | A queue with this name already exists. | Pick another name or reuse the existing queue.
    `invalid_queue_name` | 400 | Queue names use lower-case letters, digits and dashes, up to 80 characters. | Rename the queue.
    `invalid_ordering_key` | 400 | The ordering key is empty or longer than 256 bytes. | Use a shorter, non-empty key.
    `duplicate_idempotency_key` | 200 | A message with this idempotency key was stored in the last 24 hours. | Nothing: the identifier of the earlier message is returned.
    `idempotency_key_too_long` | 400 | The idempotency key is longer than 128 bytes. | Hash long keys before sending them.
    `invalid_delay` | 400 | The publish delay is negative or longer than 15 minutes. | Use a delay between 0 and 15 minutes.
    `batch_too_large` | 413 | A batch publish holds more than 100 messages or 1 MiB in total. | Split the batch.
    `empty_batch` | 400 | A batch publish holds no messages. | Skip the call when there is nothing to send.
    `invalid_max_messages` | 400 | A receive call asked for fewer than 1 or more than 100 messages. | Ask for 1 to 100 messages.
    `invalid_wait_seconds` | 400 | A receive call asked to wait longer than 20 seconds. | Wait 20 seconds at most and call again.
    `lease_expired` | 410 | The lease of the message ended before the call arrived. | Nothing to settle: the message will be delivered again.
    `lease_token_mismatch` | 409 | The lease token belongs to an earlier lease of the message. | Drop the message: another worker holds it now.
    `invalid_extension` | 400 | A lease extension is shorter than 1 second or longer than 12 hours. | Extend by 1 second to 12 hours.
    `lease_too_long` | 400 | The total lease of a message would exceed 12 hours. | Split the work into smaller messages.
    `message_not_found` | 404 | The message was settled or expired. | Nothing: it no longer exists.
    `invalid_retry_policy` | 400 | The retry policy is unknown or its delays are out of range. | Use `fixed`, `linear` or `exponential` with delays up to 12 hours.
    `max_attempts_out_of_range` | 400 | `max_attempts` is below 1 or above 100. | Use 1 to 100 attempts.
    `dead_letter_loop` | 400 | The dead-letter queue is the queue itself or sends its own dead letters back. | Pick a dead-letter queue that has none of its own.
    `dead_letter_queue_not_found` | 404 | The dead-letter queue named in the policy does not exist. | Create the dead-letter queue first.
    `retention_out_of_range` | 400 | The retention period is shorter than 1 hour or longer than the plan allows. | Pick a retention period your plan supports.
    `plan_queue_limit` | 403 | The project already has as many queues as its plan allows. | Delete unused queues or upgrade the plan.
    `plan_throughput_limit` | 429 | The project publishes faster than its plan allows. | Slow down, batch messages or upgrade the plan.
    `rate_limited` | 429 | Too many requests from one key in one second. | Retry after the delay given in the `Retry-After` header.
    `storage_quota_exceeded` | 507 | Unsettled messages take more storage than the plan allows. | Add workers or raise the quota.
    `invalid_service_key` | 401 | The service key is missing, malformed or revoked. | Copy a current key from the console.
    `key_lacks_permission` | 403 | The key may not use this queue or this operation. | Use a key whose role covers the operation.
    `project_suspended` | 403 | The project is suspended, usually for an unpaid invoice. | Contact billing.
    `region_mismatch` | 421 | The request reached a region that does not host the project. | Use the project URL shown in the console.
    `webhook_url_invalid` | 400 | The webhook URL is not HTTPS or points to a private address. | Use a public HTTPS URL.
    `webhook_secret_missing` | 400 | A webhook endpoint was created without a signing secret. | Generate a secret in the console.
    `partition_unavailable` | 503 | The partition is electing a new leader. | Retry after a second; the client libraries do this for you.
    `region_degraded` | 503 | The region cannot reach a majority of its storage nodes. | Retry with backoff and check the status page.
    `internal_error` | 500 | An unexpected failure inside Acme Queue. | Retry with backoff; report the request id if it persists.
""".strip().splitlines()
]


def limits() -> str:
    p = LIMITS_PATH
    return page(
        "# Quotas, limits and error codes",
        "Every limit the API enforces, and the error it returns when you reach it.",
        heading_2026(2, "Plan quotas", p),
        table(
            ["Quota", "Free", "Team", "Enterprise"],
            [
                ["Queues per project", "5", "100", "unlimited"],
                ["Publishes per second", "50", "2,000", "by contract"],
                ["Retention of unsettled messages", "3 days", "14 days", "up to 90 days"],
                ["Reporting export", "no", "yes", "yes"],
            ],
        ),
        heading_2026(2, "Error codes", p),
        "Every error response carries a stable `code`, listed below, a human-readable `message` and the `request_id` to quote when you contact support.",
        table(["Code", "HTTP status", "Meaning", "What to do"], ERROR_CODES),
    )


# ---------------------------------------------------------------------------------------
# Page 6: webhooks, setext headings (a page converted from an older README)
# ---------------------------------------------------------------------------------------

WEBHOOKS_PATH = "/docs/guides/webhooks"

VERIFY_PY = code("""
    import hashlib
    import hmac


    def is_from_acme(secret: bytes, body: bytes, signature: str) -> bool:
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, signature)
""")


def webhooks() -> str:
    return page(
        "Webhooks\n========",
        "Acme Queue can push messages to an HTTPS endpoint instead of waiting for a worker to pull them. Push delivery suits low volumes and serverless handlers; pull delivery remains the better choice above a few hundred messages per second.",
        "Creating an endpoint\n--------------------",
        "Open the queue in the console, choose **Push delivery** and enter the URL of your handler. Acme Queue sends one POST request per message, with the body as the request body and the attributes as headers prefixed with `Acme-Attr-`. A response with a status from 200 to 299 acknowledges the message; anything else, or no answer within the visibility timeout, counts as a failed attempt and follows the retry policy of the queue.",
        "Signing secrets\n---------------",
        "Each endpoint has a signing secret. Every request carries the header `Acme-Signature`, the hex HMAC-SHA256 of the body under that secret. Reject any request whose signature does not match:",
        fenced(VERIFY_PY, "python"),
        "Rotating a secret keeps the old one valid for 24 hours, so you can deploy the new secret before the old one stops working.",
        "Limits\n------",
        "Push delivery sends at most 50 concurrent requests per queue and waits at most 30 seconds for an answer. Endpoints that fail every request for an hour are paused, and the project owners receive an email.",
    )


# ---------------------------------------------------------------------------------------
# Pages 7-8: the Python reference, one SPA page served under two URLs; the two crawls of it
# flattened the code with different markers (`_10` vs `1`, `2`, ...)
# ---------------------------------------------------------------------------------------

PY_CREATE_CLIENT = code("""
    import os
    from acme_queue import Client

    client = Client(
        os.environ["ACME_PROJECT_URL"],
        os.environ["ACME_SERVICE_KEY"],
    )
""")

PY_PUBLISH = code("""
    message_id = client.queue("orders").publish(
        body='{"order": "ord_1042", "status": "paid"}',
        attributes={"source": "checkout"},
        ordering_key="ord_1042",
    )
""")

PY_PUBLISH_DELAY = code("""
    # Deliver in five minutes, e.g. to send a reminder.
    client.queue("reminders").publish(body="send `follow_up` email", delay_seconds=300)
""")

PY_RECEIVE = code("""
    messages = client.queue("orders").receive(max_messages=10, wait_seconds=20)

    for message in messages:
        handle(message.body)
        message.ack()
""")

PY_NACK = code("""
    try:
        handle(message.body)
    except TemporaryFailure:
        message.nack(delay_seconds=30)
    else:
        message.ack()
""")


def python_reference(style: str) -> str:
    return page(
        "Python Reference v1.0",
        "# Python Client Library",
        "acme-queue [View on GitHub](https://github.com/example/acme-queue-python)",
        "This reference documents every method of `acme-queue`, the Python client for Acme Queue. It works with Python 3.9 and later and has no dependencies besides `httpx`.",
        RULE,
        "## Initializing",
        "Create one client per process and share it between threads; it keeps a pool of connections to the project.",
        "### Parameters",
        "- project\\_urlRequiredstring\n\n\n\nThe URL of your project, shown in the console.\n\n- service\\_keyRequiredstring\n\n\n\nA service key of the project.\n\n- timeoutOptionalfloat\n\n\n\nSeconds to wait for any single request. Defaults to 30.",
        flattened(PY_CREATE_CLIENT, style),
        RULE,
        "## Publish a message",
        "- Publishing returns the identifier of the stored message.\n- Messages with the same `ordering_key` are delivered in order.",
        "### Parameters",
        "- bodyRequiredstr\n\n\n\nThe message body, UTF-8 text up to 256 KiB.\n\n- attributesOptionaldict\n\n\n\nUp to 32 short key-value pairs.\n\n- delay\\_secondsOptionalint\n\n\n\nKeep the message invisible for this long after publishing, up to 900.",
        "Basic publishWith a delay",
        flattened(PY_PUBLISH, style),
        flattened(PY_PUBLISH_DELAY, style),
        "Response",
        RULE,
        "## Receive messages",
        "### Parameters",
        "- max\\_messagesOptionalint\n\n\n\nThe largest batch to return, from 1 to 100. Defaults to 1.\n\n- wait\\_secondsOptionalint\n\n\n\nHow long to wait for a message when the queue is empty, up to 20.",
        "Receive and acknowledgeReject for a retry",
        flattened(PY_RECEIVE, style),
        flattened(PY_NACK, style),
        "Response",
    )


# ---------------------------------------------------------------------------------------
# Pages 9-10: the CLI reference, an SPA that returns the same markdown for every URL
# ---------------------------------------------------------------------------------------


def cli_reference() -> str:
    return page(
        "CLI Reference",
        "# Acme CLI",
        "The `acme` command runs a local copy of Acme Queue for development and manages queues of your projects.",
        RULE,
        heading_2024(2, "acme start"),
        "Starts a local queue server with the same API as the hosted service, storing its data in `.acme/` under the current directory.",
        flattened("acme start --port 4780"),
        heading_2024(3, "Flags"),
        "- `--port`: the port to listen on (default 4780).\n- `--reset`: delete the local data before starting.",
        heading_2024(2, "acme stop"),
        "Stops the local server. Messages that were not settled are kept and delivered again on the next start.",
        flattened("acme stop"),
        heading_2024(2, "acme queue create"),
        "Creates a queue in the linked project, or in the local server when it is running.",
        flattened(
            "acme queue create orders --visibility-timeout 30s\nacme queue create orders-dlq"
        ),
    )


# ---------------------------------------------------------------------------------------
# Pages 11-12: an empty page and a page that is only headings
# ---------------------------------------------------------------------------------------


def integrations() -> str:
    return page(
        "# Integrations",
        heading_2024(2, "Slack"),
        heading_2024(2, "PagerDuty"),
        heading_2024(3, "Incident routing"),
    )


# ---------------------------------------------------------------------------------------
# The crawl
# ---------------------------------------------------------------------------------------


def pages() -> list[dict]:
    """Every page of the crawl, in crawl order."""
    started = getting_started()
    tracked = metadata_2024(
        GETTING_STARTED_PATH,
        "Getting started",
        "Send and receive your first message with Acme Queue.",
    )
    tracked["sourceURL"] = tracked["url"] = (
        SITE + GETTING_STARTED_PATH + "?utm_source=newsletter&utm_medium=email"
    )
    return [
        {
            "markdown": started,
            "metadata": metadata_2024(
                GETTING_STARTED_PATH,
                "Getting started",
                "Send and receive your first message with Acme Queue.",
            ),
        },
        {
            "markdown": retries(),
            "metadata": metadata_2026(
                RETRIES_PATH, "Retries and dead-letter queues", "What happens when a worker fails."
            ),
        },
        {
            "markdown": architecture(),
            "metadata": metadata_2026(
                ARCHITECTURE_PATH, "How delivery works", "The life of a message in Acme Queue."
            ),
        },
        {
            "markdown": reporting_schema(),
            "metadata": metadata_2026(
                SCHEMA_PATH, "Reporting schema", "Delivery history in your own Postgres database."
            ),
        },
        {
            "markdown": limits(),
            "metadata": metadata_2026(
                LIMITS_PATH, "Quotas and limits", "Limits of the API and its error codes."
            ),
        },
        {
            "markdown": webhooks(),
            "metadata": metadata_2026(
                WEBHOOKS_PATH, "Webhooks", "Push messages to an HTTPS endpoint."
            ),
        },
        {
            "markdown": python_reference("underscore"),
            "metadata": metadata_2024(
                "/docs/reference/python/publish",
                "Python Reference",
                "Reference of the Python client for Acme Queue.",
            ),
        },
        {
            "markdown": python_reference("numbered"),
            "metadata": metadata_2024(
                "/docs/reference/python/receive",
                "Python Reference",
                "Reference of the Python client for Acme Queue.",
            ),
        },
        {
            "markdown": cli_reference(),
            "metadata": metadata_2024(
                "/docs/reference/cli/start", "CLI Reference", "Reference of the acme command."
            ),
        },
        {
            "markdown": cli_reference(),
            "metadata": metadata_2024(
                "/docs/reference/cli/stop", "CLI Reference", "Reference of the acme command."
            ),
        },
        {
            "markdown": "",
            "metadata": metadata_2026(
                "/docs/guides/dashboard", "Dashboard", "A tour of the Acme console."
            ),
        },
        {
            "markdown": integrations(),
            "metadata": metadata_2024(
                "/docs/guides/integrations", "Integrations", "Connect Acme Queue to other tools."
            ),
        },
        {"markdown": started, "metadata": tracked},
    ]


def crawl() -> dict:
    data = pages()
    return {
        "success": True,
        "status": "completed",
        "completed": len(data),
        "total": len(data),
        "creditsUsed": len(data),
        "data": data,
    }


def check_promises(counter: TokenCounter) -> dict[str, int]:
    """The sizes data/sample/README.md promises; fails loudly if an edit breaks one."""
    sizes = {
        "SQL migration block (reporting-schema)": counter.count(REPORTING_MIGRATION),
        "error-code table (limits)": counter.count(
            table(["Code", "HTTP status", "Meaning", "What to do"], ERROR_CODES)
        ),
        "'The life of a message' section (architecture)": counter.count(
            "\n\n".join(LIFE_OF_A_MESSAGE)
        ),
    }
    minimum = {
        "SQL migration block (reporting-schema)": HARD_LIMIT,
        "error-code table (limits)": HARD_LIMIT,
        "'The life of a message' section (architecture)": 2 * HARD_LIMIT,
    }
    for name, tokens in sizes.items():
        if tokens <= minimum[name]:
            raise SystemExit(
                f"{name} has {tokens} tokens; the sample promises over {minimum[name]}"
            )
    return sizes


def main() -> None:
    counter = TokenCounter()
    sizes = check_promises(counter)
    document = crawl()
    write_json(OUT, document)
    for item in document["data"]:
        tokens = counter.count(item["markdown"])
        print(f"{tokens:6d} tokens  {item['metadata']['sourceURL']}")
    for name, tokens in sizes.items():
        print(f"{tokens:6d} tokens  {name}")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
