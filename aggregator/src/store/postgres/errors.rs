//! The store errors of the driver's and the pool's failures: unavailable when a retry
//! may succeed, internal otherwise; corrupt or inconsistent stored values.

use crate::store::codec::Corruption;
use crate::store::{Cause, StoreError};

/// The store error for a failed statement: [`StoreError::Unavailable`] when the
/// database is unreachable or the failure is transient, [`StoreError::Internal`]
/// otherwise.
pub(crate) fn db_error(e: tokio_postgres::Error) -> StoreError {
    if transient(&e) {
        StoreError::unavailable(Cause::backend("PostgreSQL", e))
    } else {
        StoreError::internal(Cause::backend("PostgreSQL", e))
    }
}

/// The store error when no connection can be had: the database is unreachable.
pub(crate) fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    use deadpool_postgres::PoolError;
    match &e {
        PoolError::Backend(b) if !transient(b) => StoreError::internal(pool_cause(e)),
        PoolError::Closed => StoreError::unavailable(Cause::ShuttingDown),
        _ => StoreError::unavailable(pool_cause(e)),
    }
}

/// The cause of a failure to get a connection from the pool.
fn pool_cause(e: deadpool_postgres::PoolError) -> Cause {
    Cause::backend("PostgreSQL connection pool", e)
}

/// Whether `e` may go away when retried: no connection (I/O, closed), or an error
/// class PostgreSQL documents as transient.
fn transient(e: &tokio_postgres::Error) -> bool {
    use std::error::Error as _;
    if e.is_closed()
        || e.source()
            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
    {
        return true;
    }
    match e.code() {
        Some(code) => {
            let code = code.code();
            // 08: connection exception; 53: insufficient resources; 57P: operator
            // intervention (shutdown, cannot connect now); 40001 serialization
            // failure; 40P01 deadlock.
            code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || code == "40001"
                || code == "40P01"
        }
        None => false,
    }
}

/// A stored `bigint` count as `u64` (negative only if the database was altered).
pub(super) fn to_u64(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| {
        StoreError::internal(Cause::Inconsistent(format!(
            "negative count {v} in the database"
        )))
    })
}

/// The store error for a stored value that does not decode.
pub(super) fn corrupt(e: Corruption) -> StoreError {
    StoreError::internal(Cause::Corrupt(e))
}
