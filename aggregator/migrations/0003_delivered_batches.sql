-- ldpcov PostgreSQL store, schema version 3: what each shuffled collection's completed
-- batches delivered.
--
-- One row per shuffled collection that has completed a batch: the batches recorded (a
-- resent batch is recorded again) and the fewest valid reports any of them held, which
-- sets the central guarantee the batches delivered. A record is one upsert (the minimum
-- is idempotent, so replicas recording at once need no lock). Removing a collection
-- deletes its row.
CREATE TABLE delivered_batches (
    collection text PRIMARY KEY REFERENCES collections (id),
    batches    bigint NOT NULL CHECK (batches > 0),
    smallest   bigint NOT NULL CHECK (smallest >= 0)
);
