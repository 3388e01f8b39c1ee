-- ldpcov PostgreSQL store, schema version 6: a two-aggregator collection's leader queue
-- and helper verdicts.
--
-- queued_uploads: the uploads a leader holds until the helper has answered them, one
-- row per (collection, report id) (the unique key: a retried upload queues nothing),
-- listed oldest first by seq. An upload is inserted in a transaction that holds the
-- collection row FOR SHARE and has read it open (a close waits for it, and a later
-- upload sees the close); its row is deleted in the transaction that counts the
-- reports the helper answered for it, so no crash separates the two.
CREATE TABLE queued_uploads (
    collection text NOT NULL REFERENCES collections (id),
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    report_id  bytea NOT NULL CHECK (octet_length(report_id) = 16),
    body       bytea NOT NULL,
    PRIMARY KEY (collection, seq),
    UNIQUE (collection, report_id)
);

-- verdicts: a helper's verdict on each report id it verified, inserted (ON CONFLICT DO
-- NOTHING: the first verdict stays) in the transaction that counts the reports it
-- accepted, so a report is never counted without its verdict, nor the other way round.
-- New tables: the existing rows are unchanged. Removing a collection deletes its rows.
CREATE TABLE verdicts (
    collection text NOT NULL REFERENCES collections (id),
    report_id  bytea NOT NULL CHECK (octet_length(report_id) = 16),
    verdict    bytea NOT NULL,
    PRIMARY KEY (collection, report_id)
);
