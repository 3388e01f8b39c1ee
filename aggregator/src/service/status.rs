//! The gRPC statuses of the service's errors: a store error, an estimator error, an
//! invalid argument.

use ldpcov_estimate::EstimateError;
use tonic::Status;

use crate::store::StoreError;

/// Maps a store error to its gRPC status.
pub(crate) fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NotFound(_) => Status::not_found(e.to_string()),
        StoreError::AlreadyExists(_) => Status::already_exists(e.to_string()),
        StoreError::Closed(_) => Status::failed_precondition(e.to_string()),
        StoreError::Internal(_) => Status::internal(e.to_string()),
        StoreError::Unavailable(_) => Status::unavailable(e.to_string()),
        StoreError::BudgetExhausted { .. } => Status::resource_exhausted(e.to_string()),
    }
}

pub(super) fn estimate_status(e: EstimateError) -> Status {
    match e {
        EstimateError::BelowMinimum { .. } => Status::failed_precondition(e.to_string()),
        EstimateError::ThresholdParameter { .. } | EstimateError::Parameter { .. } => {
            Status::invalid_argument(e.to_string())
        }
        EstimateError::SumLength { .. } | EstimateError::Eigen => Status::internal(e.to_string()),
    }
}

/// `INVALID_ARGUMENT` with this message.
pub(super) fn invalid(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}
