-- ldpcov PostgreSQL store, schema version 2: the release ledger of collections with a
-- privacy budget (trusted-aggregator collections).
--
-- One row per recorded release: the key of the request it answers, the zCDP rho it
-- spent and its body (the answer, opaque to the store). A release is recorded in one
-- transaction that locks the collection's row FOR UPDATE, sums the rho already spent
-- and inserts only if the budget allows: replicas recording concurrently never spend
-- more than the budget together, and asking again under the same key returns the
-- recorded body at no cost. Removing a collection deletes its rows.
CREATE TABLE releases (
    collection text NOT NULL REFERENCES collections (id),
    key        bytea NOT NULL,
    rho        double precision NOT NULL CHECK (rho > 0),
    body       bytea NOT NULL,
    PRIMARY KEY (collection, key)
);
