"""The queue's contract suite on a Citus cluster, in Citus mode.

The tests of the contract modules below that work on the shared queue
fixtures run again here (`tests.support.rerun`), their queues opened with
`citus=True` on a database spread over the cluster (conftest.py). Left out:
what Citus mode refuses (workflows, batches, durable steps), and the tests
named in SKIP, each with its reason."""

from __future__ import annotations

from tests.contract.queue.test_unique_race import racers  # noqa: F401  (its fixture)
from tests.support.rerun import SHARED, rerun

CONTRACT = (
    "admin", "async", "bad_input", "browse", "cancel", "claim", "claim_above", "enqueue",
    "enqueue_bulk", "json_values", "limits", "notices", "outcomes", "pause", "recovery",
    "results", "unique", "wait", "unique_race", "portable_statements",
)  # fmt: skip

SKIP: dict[str, str] = {
    "test_every_read_walks_an_index": "the coordinator merges the shards' rows with a sort of"
    " its own, so no plan it shows walks the index",
    "test_all_or_nothing_across_copy_and_keyed_rows": "makes a row fail with a trigger of its"
    " own, which Citus does not run on a distributed table",
    "test_requeue_crashed_finds_a_workers_jobs_through_the_lease_index": "explains"
    " PostgreSQL's own statement, as one server plans it",
    "test_unique_on_a_database_upgraded_with_jobs_in_it": "builds an old schema by hand in"
    " statements Citus takes only one at a time",
}

globals().update(rerun(CONTRACT, skip=SKIP, own_queues=True, shared=SHARED | {"racers"}))
