-- ldpcov PostgreSQL store, schema version 4: appended reports and sharded bases.
--
-- A committed batch whose counted reports are smaller in their compact form (a report
-- log: the vector of a rank-one report, the entries of another; format in
-- aggregator/src/store/codec.rs) than a dense delta appends that log instead of a
-- delta row. Folders add logs and deltas into the bases later, exactly once: a fold
-- locks the rows it takes FOR UPDATE SKIP LOCKED and deletes them in the transaction
-- that adds them to a base. A collection's sums are all its bases, deltas and logs.
CREATE TABLE appended (
    collection text NOT NULL REFERENCES collections (id),
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    count      bigint NOT NULL CHECK (count > 0),
    reports    bytea NOT NULL,
    -- When the batch was committed (its transaction's start): a replica's scheduled
    -- fold takes a collection only once its oldest report log is a fold interval old,
    -- so that more replicas do not mean more folds.
    appended_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection, seq)
);
-- Report logs are integers that pglz hardly shrinks: store them out of line,
-- uncompressed, instead of spending the commit's CPU on trying.
ALTER TABLE appended ALTER COLUMN reports SET STORAGE EXTERNAL;

-- A collection's folded sums in several rows (shards), so that folders on different
-- replicas each lock one FOR UPDATE SKIP LOCKED and fold at the same time. The rows
-- of shards 1 and up are created by the aggregator (at open and with a collection);
-- the existing row is shard 0.
ALTER TABLE bases ADD COLUMN shard integer NOT NULL DEFAULT 0 CHECK (shard >= 0);
ALTER TABLE bases DROP CONSTRAINT bases_pkey;
ALTER TABLE bases ADD PRIMARY KEY (collection, shard);
