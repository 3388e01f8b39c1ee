//! What the relay pins of a shuffled collection the first time it accepts it: the
//! parts of the aggregator's answer its central guarantee depends on
//! ([`PinnedSettings`]). They are stored durably ([`RelayStore::pin`]) and every later
//! answer is compared with them ([`PinnedSettings::differences`]): a collection whose
//! settings changed is refused, and its reports are not forwarded, while the change
//! persists.
//!
//! [`RelayStore::pin`]: crate::RelayStore::pin

use ldpcov_proto::v1::CollectionParams;
use prost::Message;
use sha2::{Digest, Sha256};

/// The settings of a shuffled collection the relay pins at first sight.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedSettings {
    /// The spec's `shuffle.min_batch_size`, as announced.
    pub min_batch_size: u64,
    /// The spec's `shuffle.batch_window_seconds`.
    pub batch_window_seconds: u64,
    /// The spec's `shuffle.central_delta`.
    pub central_delta: f64,
    /// ε0 of one report (`spec.epsilon`).
    pub epsilon: f64,
    /// The spec's `local_mechanism`.
    pub local_mechanism: i32,
    /// The spec's `dim`.
    pub dim: u32,
    /// SHA-256 of the encoded spec (any other change of the spec shows here).
    pub spec_digest: [u8; 32],
    /// The encoded parameters as first seen, without keys (what the relay serves
    /// devices: the same bytes to every one).
    pub params: Vec<u8>,
}

/// Fixed-size head of an encoded [`PinnedSettings`]: three u64, two f64 bits, i32, u32,
/// the digest.
const HEAD: usize = 8 * 5 + 4 + 4 + 32;

impl PinnedSettings {
    /// From the aggregator's answer for a shuffled collection (`None`: it has no spec
    /// or no shuffle settings).
    pub fn from_params(params: &CollectionParams) -> Option<Self> {
        let spec = params.spec.as_ref()?;
        let shuffle = spec.shuffle.as_ref()?;
        let mut stripped = params.clone();
        if let Some(s) = stripped.shuffle.as_mut() {
            s.keys.clear();
        }
        Some(PinnedSettings {
            min_batch_size: shuffle.min_batch_size,
            batch_window_seconds: shuffle.batch_window_seconds,
            central_delta: shuffle.central_delta,
            epsilon: spec.epsilon,
            local_mechanism: spec.local_mechanism,
            dim: spec.dim,
            spec_digest: Sha256::digest(spec.encode_to_vec()).into(),
            params: stripped.encode_to_vec(),
        })
    }

    /// What differs between the pinned settings (`self`) and `now`, one phrase per
    /// field ("min_batch_size 1000 → 2"); empty when nothing does. The whole spec's
    /// digest is compared last, for changes outside the named fields.
    pub fn differences(&self, now: &PinnedSettings) -> Vec<String> {
        let mut out = Vec::new();
        let mut field = |name: &str, was: String, is: String| {
            if was != is {
                out.push(format!("{name} {was} → {is}"));
            }
        };
        field(
            "min_batch_size",
            self.min_batch_size.to_string(),
            now.min_batch_size.to_string(),
        );
        field(
            "batch_window_seconds",
            self.batch_window_seconds.to_string(),
            now.batch_window_seconds.to_string(),
        );
        field(
            "central_delta",
            format!("{:e}", self.central_delta),
            format!("{:e}", now.central_delta),
        );
        field("epsilon", self.epsilon.to_string(), now.epsilon.to_string());
        field(
            "local_mechanism",
            self.local_mechanism.to_string(),
            now.local_mechanism.to_string(),
        );
        field("dim", self.dim.to_string(), now.dim.to_string());
        if out.is_empty() && self.spec_digest != now.spec_digest {
            out.push("another field of the spec".into());
        }
        out
    }

    /// The stored form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD + self.params.len());
        out.extend_from_slice(&self.min_batch_size.to_le_bytes());
        out.extend_from_slice(&self.batch_window_seconds.to_le_bytes());
        out.extend_from_slice(&self.central_delta.to_bits().to_le_bytes());
        out.extend_from_slice(&self.epsilon.to_bits().to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&self.local_mechanism.to_le_bytes());
        out.extend_from_slice(&self.dim.to_le_bytes());
        out.extend_from_slice(&self.spec_digest);
        out.extend_from_slice(&self.params);
        out
    }

    /// From the stored form.
    pub(crate) fn decode(id: &str, bytes: &[u8]) -> Result<Self, CorruptPin> {
        if bytes.len() < HEAD {
            return Err(CorruptPin(format!(
                "the pinned settings of collection {id}: {} bytes",
                bytes.len()
            )));
        }
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at = |i: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&bytes[i..i + 4]);
            u32::from_le_bytes(w)
        };
        let mut spec_digest = [0u8; 32];
        spec_digest.copy_from_slice(&bytes[48..80]);
        Ok(PinnedSettings {
            min_batch_size: u64_at(0),
            batch_window_seconds: u64_at(8),
            central_delta: f64::from_bits(u64_at(16)),
            epsilon: f64::from_bits(u64_at(24)),
            local_mechanism: u32_at(40) as i32,
            dim: u32_at(44),
            spec_digest,
            params: bytes[HEAD..].to_vec(),
        })
    }

    /// The pinned parameters (without keys).
    pub fn params(&self) -> Result<CollectionParams, CorruptPin> {
        CollectionParams::decode(self.params.as_slice())
            .map_err(|e| CorruptPin(format!("pinned parameters: {e}")))
    }
}

/// Pinned settings that do not decode: the store reports them as corrupt.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CorruptPin(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::{CollectionSpec, ShuffleSpec};

    fn params(min: u64, dim: u32, min_reports: u64) -> CollectionParams {
        CollectionParams {
            spec: Some(CollectionSpec {
                collection_id: "c".into(),
                dim,
                epsilon: 4.0,
                min_reports,
                shuffle: Some(ShuffleSpec {
                    min_batch_size: min,
                    batch_window_seconds: 60,
                    central_delta: 1e-7,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            entries: 10,
            ..Default::default()
        }
    }

    #[test]
    fn round_trips_and_names_what_changed() {
        let a = PinnedSettings::from_params(&params(1000, 4, 1)).unwrap();
        assert_eq!(PinnedSettings::decode("c", &a.encode()).unwrap(), a);
        assert!(a.differences(&a).is_empty());
        let b = PinnedSettings::from_params(&params(2, 5, 1)).unwrap();
        assert_eq!(a.differences(&b), ["min_batch_size 1000 → 2", "dim 4 → 5"]);
        let c = PinnedSettings::from_params(&params(1000, 4, 7)).unwrap();
        assert_eq!(a.differences(&c), ["another field of the spec"]);
        assert!(PinnedSettings::decode("c", &[0; 10]).is_err());
    }
}
