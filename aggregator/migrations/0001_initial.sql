-- ldpcov PostgreSQL store, schema version 1 (applied by aggregator/src/postgres/schema.rs
-- inside one transaction under an advisory lock, recorded in schema_migrations).
--
-- Sums are exact integers: accumulators are bytea blobs in the durable store's format
-- (magic LDPACC01: per-fold i64 sums, u128 sums of squares, little-endian), added in
-- Rust, never as SQL floats.

-- One row per collection: its CollectionSpec (protobuf bytes, as the redb store keeps
-- it) and the closed flag. Batches lock this row FOR SHARE, a close updates it: a batch
-- is counted entirely before a close or refused.
CREATE TABLE collections (
    id     text PRIMARY KEY,
    spec   bytea NOT NULL,
    closed boolean NOT NULL DEFAULT false
);

-- The folded accumulators of a collection (created with it; acc NULL until the first
-- fold). Folders lock this row FOR UPDATE; batches never touch it.
CREATE TABLE bases (
    collection text PRIMARY KEY REFERENCES collections (id),
    count      bigint NOT NULL CHECK (count >= 0),
    acc        bytea
);

-- One row per committed batch and collection: the batch's partial accumulators.
-- A fold adds a set of deltas into the base and deletes them in one transaction.
CREATE TABLE deltas (
    collection text NOT NULL REFERENCES collections (id),
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    count      bigint NOT NULL CHECK (count > 0),
    acc        bytea NOT NULL,
    PRIMARY KEY (collection, seq)
);

-- Every counted report id, inserted in the transaction of the delta that counts it:
-- the primary key makes an id count at most once per collection across all replicas.
-- (No foreign key: one per report would cost a lookup per insert; removing a
-- collection deletes its rows explicitly.)
CREATE TABLE seen (
    collection text NOT NULL,
    report_id  bytea NOT NULL,
    PRIMARY KEY (collection, report_id)
);
