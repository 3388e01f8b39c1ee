//! Checks on what the aggregator releases and refuses: a packed estimate is a finite
//! positive semi-definite matrix ([`assert_packed_psd`]), bad specs create nothing
//! ([`assert_specs_refused`]), χ² bounds for noise-variance tests
//! ([`chi2_ratio_bounds`]).

use ldpcov_privacy::collection::validate_collection_id;
use ldpcov_privacy::layout::{triangle_index, unpack_symmetric};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{CollectionSpec, CreateCollectionRequest, GetStatusRequest};
use tonic::Code;
use tonic::transport::Channel;

/// Asserts what a released packed `p × p` matrix must satisfy, read from the packed
/// row-major upper triangle itself (unpacking makes any matrix symmetric, so a
/// symmetry check after it cannot fail): `p(p+1)/2` entries, all finite, and the
/// matrix they pack is `⪰ floor·I`. The last is checked through conditions on the
/// packed entries that any such matrix meets (every diagonal entry `≥ floor`, every
/// 2×2 principal minor of `A − floor·I` non-negative: `a_ij² ≤ (a_ii − floor)(a_jj −
/// floor)`) and through the eigenvalues of the unpacked matrix (`≥ floor`). Rounding:
/// the projection is exact up to a few ulps of the largest entry times p, so `tol`
/// is 1e-9 of `p·max|a|`.
pub(crate) fn assert_packed_psd(packed: &[f64], p: usize, floor: f64) {
    assert_eq!(packed.len(), p * (p + 1) / 2, "packed length at p = {p}");
    assert!(
        packed.iter().all(|v| v.is_finite()),
        "non-finite entry in {packed:?}"
    );
    let largest = packed.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = 1e-9 * p as f64 * largest.max(1.0);
    let at = |i: usize, j: usize| packed[triangle_index(p, i, j)];
    for i in 0..p {
        assert!(at(i, i) >= floor - tol, "a_{i}{i} = {} < {floor}", at(i, i));
        for j in i + 1..p {
            let room = (at(i, i) - floor).max(0.0) * (at(j, j) - floor).max(0.0);
            assert!(
                at(i, j) * at(i, j) <= room + tol * largest.max(1.0),
                "a_{i}{j} = {} exceeds the 2×2 minor bound √{room}",
                at(i, j)
            );
        }
    }
    let m = nalgebra::DMatrix::from_row_slice(p, p, &unpack_symmetric(p, packed));
    let min = m.symmetric_eigenvalues().min();
    assert!(min >= floor - tol, "min eigenvalue {min} < {floor}");
}

/// Asserts that creating each named spec is INVALID_ARGUMENT and, when its id is a
/// valid one, that no collection of that id exists afterwards.
pub(crate) async fn assert_specs_refused(
    raw: &mut RawClient<Channel>,
    cases: Vec<(&str, CollectionSpec)>,
) {
    for (name, spec) in cases {
        let id = spec.collection_id.clone();
        let err = raw
            .create_collection(CreateCollectionRequest { spec: Some(spec) })
            .await
            .expect_err(name);
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{name}: {}",
            err.message()
        );
        if validate_collection_id(&id).is_ok() {
            let e = raw
                .get_status(GetStatusRequest { collection_id: id })
                .await
                .expect_err(name);
            assert_eq!(e.code(), Code::NotFound, "{name} created something");
        }
    }
}

/// Laurent & Massart (2000, Lemma 1): for `X ~ χ²_k`,
/// `P(X ≥ k + 2√(kx) + 2x) ≤ e^{−x}` and `P(X ≤ k − 2√(kx)) ≤ e^{−x}`; at x = 21 each
/// side is below 10⁻⁹. Returns the two quantiles divided by k.
pub(crate) fn chi2_ratio_bounds(k: usize) -> (f64, f64) {
    let (k, x) = (k as f64, 21.0);
    (
        (k - 2.0 * (k * x).sqrt()) / k,
        (k + 2.0 * (k * x).sqrt() + 2.0 * x) / k,
    )
}
