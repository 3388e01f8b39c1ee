//! The device's own floor on privacy: collections asking for more than this are
//! refused, whatever the server says.

use crate::ClientError;
use ldpcov_proto::Collection;

/// The weakest privacy a client agrees to give: the largest ε and δ of one report.
///
/// The default refuses collections with ε > 10 or δ > 10⁻³. A collection's σ is always
/// re-derived locally from its (ε, δ), so a server can only obtain less noise by asking
/// for a larger ε or δ, which is what this policy bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacyPolicy {
    /// Largest ε accepted.
    pub max_epsilon: f64,
    /// Largest δ accepted.
    pub max_delta: f64,
}

impl Default for PrivacyPolicy {
    fn default() -> Self {
        PrivacyPolicy {
            max_epsilon: 10.0,
            max_delta: 1e-3,
        }
    }
}

impl PrivacyPolicy {
    /// Checks that `collection` asks for no weaker privacy than this policy allows.
    ///
    /// A NaN bound refuses every collection.
    pub fn check(&self, collection: &Collection) -> Result<(), ClientError> {
        let ok = collection.epsilon() <= self.max_epsilon && collection.delta() <= self.max_delta;
        if ok {
            Ok(())
        } else {
            Err(ClientError::PolicyViolation {
                epsilon: collection.epsilon(),
                delta: collection.delta(),
                max_epsilon: self.max_epsilon,
                max_delta: self.max_delta,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(epsilon: f64, delta: f64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "policy".into(),
            dim: 2,
            epsilon,
            delta,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: 0,
            ..Default::default()
        })
        .expect("valid spec")
    }

    #[test]
    fn default_policy_bounds_epsilon_and_delta() {
        let policy = PrivacyPolicy::default();
        assert!(policy.check(&collection(1.0, 1e-6)).is_ok());
        assert!(policy.check(&collection(10.0, 1e-3)).is_ok());
        assert!(matches!(
            policy.check(&collection(10.5, 1e-6)),
            Err(ClientError::PolicyViolation { epsilon, .. }) if epsilon == 10.5
        ));
        assert!(matches!(
            policy.check(&collection(1.0, 2e-3)),
            Err(ClientError::PolicyViolation { .. })
        ));
        let nan = PrivacyPolicy {
            max_epsilon: f64::NAN,
            max_delta: 1.0,
        };
        assert!(nan.check(&collection(0.1, 1e-9)).is_err());
    }
}
