//! Tests: σ².

use super::*;

#[test]
fn sigma2_from_f64_is_the_exact_square() {
    for sigma in [
        0.5,
        1.0,
        3.0,
        0.1,
        1e8,
        1.0e8 + 0.37,
        6.02e7,
        2e9,
        2f64.powi(50),
    ] {
        let s2 = Sigma2::from_sigma(sigma).unwrap();
        // σ = m·2^e exactly; check num·2^(-2e) = m²·den in big integers.
        let bits = sigma.to_bits();
        let m = (bits & ((1 << 52) - 1)) | 1 << 52;
        let e = ((bits >> 52) & 0x7ff) as i64 - 1075;
        let lhs = BigUint::from(s2.numerator()) << 400u64;
        let rhs = (BigUint::from(m) * BigUint::from(m) * BigUint::from(s2.denominator()))
            << (400 + 2 * e) as u64;
        assert_eq!(lhs, rhs, "σ = {sigma}");
        let approx = s2.numerator() as f64 / s2.denominator() as f64;
        assert!((approx / (sigma * sigma) - 1.0).abs() < 1e-15);
        assert_eq!(s2.floor_sigma(), sigma.floor() as u64, "σ = {sigma}");
    }
    // Reduced fractions.
    assert_eq!(
        Sigma2::from_ratio(18, 2).unwrap(),
        Sigma2::from_ratio(9, 1).unwrap()
    );
    assert_eq!(
        Sigma2::from_sigma(0.5).unwrap(),
        Sigma2::from_ratio(1, 4).unwrap()
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-3, 2f64.powi(51)] {
        assert!(Sigma2::from_sigma(bad).is_err(), "{bad}");
    }
    assert!(Sigma2::from_ratio(1, 0).is_err());
    assert!(Sigma2::from_ratio(0, 1).is_err());
    assert!(Sigma2::from_ratio(1, 1 << 17).is_err());
    assert!(Sigma2::from_ratio(1, 1 << 16).is_ok());
    assert!(Sigma2::from_ratio(1 << 100, 1).is_ok());
    assert!(Sigma2::from_ratio((1 << 100) + 1, 1).is_err());
    assert!(Sigma2::from_ratio(u128::MAX, u128::MAX - 1).is_ok());
}
