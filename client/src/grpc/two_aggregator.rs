//! Two-aggregator collections on the device's client: the helper's own keys, the
//! report's shares built, the upload to the leader (docs/PRIVACY.md §10).

use ldpcov_proto::v1::{GetCollectionRequest, TwoAggregatorReport};
use tonic::transport::Channel;

use super::{AggregatorClient, BearerToken, SubmitOutcome, retrying};
use crate::{ClientError, Collection, ReportId};

impl AggregatorClient {
    /// Asks the helper on `channel` for two-aggregator collections' keys: a device seals
    /// the helper's share to the key the helper itself publishes, never to one the leader
    /// (this client's aggregator) relays, which would hand the leader both shares
    /// (docs/PRIVACY.md §10). Without a helper, [`collection`](Self::collection) refuses a
    /// two-aggregator collection.
    pub fn with_helper(mut self, channel: Channel) -> Self {
        self.helper = Some(Self::stub(channel, BearerToken::default()));
        self
    }

    /// A two-aggregator collection's report for `x`: the Prio3 shares with the helper's
    /// sealed to the helper's own key (fetched by [`collection`](Self::collection)),
    /// charged to the ledger. Nothing is sent.
    pub fn prepare_two_aggregator_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<TwoAggregatorReport, ClientError> {
        let key = self
            .helper_keys
            .get(collection.id())
            .cloned()
            .ok_or_else(|| ClientError::NoHelper {
                id: collection.id().to_string(),
            })?;
        self.device.two_aggregator_report(collection, &key, x)
    }

    /// Uploads a prebuilt two-aggregator report to the leader (this client's
    /// aggregator), retrying transient failures with the same bytes: the leader stores it
    /// and verifies it with the helper later; a report id is counted once.
    pub async fn upload_two_aggregator_report(
        &mut self,
        report: TwoAggregatorReport,
    ) -> Result<SubmitOutcome, ClientError> {
        let report_id = ReportId::try_from(report.report_id.as_slice())?;
        self.send_retried(
            "UploadTwoAggregatorReport",
            report_id,
            report,
            |mut c, report| async move { c.upload_two_aggregator_report(report).await },
            |r| r.duplicate,
        )
        .await
    }

    /// The helper's active key of two-aggregator `collection`, from the helper's own
    /// answer, which must describe the same collection as the leader's.
    pub(super) async fn fetch_helper_key(
        &mut self,
        collection: &Collection,
    ) -> Result<(), ClientError> {
        let id = collection.id().to_string();
        let helper = self
            .helper
            .clone()
            .ok_or_else(|| ClientError::NoHelper { id: id.clone() })?;
        let request = GetCollectionRequest {
            collection_id: id.clone(),
        };
        let (params, _) = retrying(
            self.retry,
            self.timeout,
            "helper GetCollection",
            helper,
            |mut c| {
                let request = request.clone();
                async move { c.get_collection(request).await }
            },
        )
        .await
        .map_err(|(status, _)| status)?;
        let theirs = Collection::from_params(&params)?;
        if &theirs != collection {
            return Err(ClientError::HelperMismatch {
                id,
                reason: "the helper's collection has another spec than the leader's".into(),
            });
        }
        let keys = params
            .two_aggregator
            .map(|t| t.helper_keys)
            .unwrap_or_default();
        let key = crate::shuffle::active_key(&keys).map_err(|e| ClientError::HelperMismatch {
            id: id.clone(),
            reason: format!("the helper publishes no usable key: {e}"),
        })?;
        self.helper_keys.insert(id, key);
        Ok(())
    }
}
