-- ldpcov PostgreSQL store, schema version 5: the reports counted under each shuffled
-- batch.
--
-- One row per (collection, relay batch id) whose sends counted reports: how many. A
-- chunk's row is upserted (accepted = accepted + the chunk's) in the transaction that
-- inserts its reports' seen ids, so a report is never counted without its batch's
-- tally, nor the other way round. A completed batch's delivered users are its reports
-- counted now plus, for a resent batch, its duplicates up to what earlier sends of the
-- same batch id counted: a report id counted in another batch never counts again.
-- A new table, not a column of seen or delivered_batches: the existing rows are
-- unchanged. Removing a collection deletes its rows.
CREATE TABLE shuffled_batch_counts (
    collection text NOT NULL REFERENCES collections (id),
    batch_id   bytea NOT NULL CHECK (octet_length(batch_id) = 16),
    accepted   bigint NOT NULL CHECK (accepted > 0),
    PRIMARY KEY (collection, batch_id)
);
