//! An aggregator's share kept in ordinary exact integer sums: each element of a report's
//! output share (Prio3's 128-bit field) as [`SHARE_LIMBS`] limbs of
//! [`SHARE_LIMB_BITS`] bits, summed by the store like any report's entries, and the
//! field share recovered from the limbs' sums when it is released.

use ldpcov_estimate::Accumulator;
use ldpcov_prio::Field;
use ldpcov_privacy::two_aggregator::{SHARE_LIMB_BITS, SHARE_LIMBS};
use prio::vdaf::{AggregateShare, OutputShare};

const LIMB_MASK: u128 = (1 << SHARE_LIMB_BITS) - 1;

/// The limbs of an output share, element by element, least significant first: the
/// entries an aggregator's accumulator adds for one report (each in `[0, 2^16)`).
pub fn share_limbs(share: &OutputShare<Field>) -> Vec<i32> {
    let elements: &[Field] = share.as_ref();
    let mut limbs = Vec::with_capacity(elements.len() * SHARE_LIMBS);
    for &element in elements {
        let mut value = u128::from(element);
        for _ in 0..SHARE_LIMBS {
            limbs.push((value & LIMB_MASK) as i32);
            value >>= SHARE_LIMB_BITS;
        }
    }
    limbs
}

/// The aggregate share (the field sum of every counted report's output share) from an
/// accumulator of their limbs: each element is `Σ_k s_k·2^(16k)` reduced in the field,
/// `s_k` the sum of its `k`-th limbs over every fold. Exact while each limb's sum fits
/// an `i64`, i.e. below `2^47` reports.
pub fn aggregate_share(acc: &Accumulator) -> AggregateShare<Field> {
    let entries = acc.entries();
    let mut sums = vec![0i128; entries];
    for fold in &acc.fold_sums {
        for (sum, &v) in sums.iter_mut().zip(fold) {
            *sum += i128::from(v);
        }
    }
    let elements = sums
        .chunks(SHARE_LIMBS)
        .map(|limbs| {
            limbs
                .iter()
                .enumerate()
                .fold(Field::from(0u128), |element, (k, &sum)| {
                    // Limbs are never negative, so neither are their sums.
                    let sum = Field::from(sum.unsigned_abs());
                    element + sum * Field::from(1u128 << (k as u32 * SHARE_LIMB_BITS))
                })
        })
        .collect::<Vec<_>>();
    AggregateShare::from(elements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_estimate::FOLDS;
    use prio::field::FieldElementWithInteger;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Summing limbs in integers and folding them back is the field sum of the shares,
    /// for shares near the modulus (where every limb is large and the sum wraps many
    /// times), spread over folds.
    #[test]
    fn limb_sums_give_the_field_sum() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let q = Field::modulus();
        let len = 5;
        let mut acc = Accumulator::new(len * SHARE_LIMBS, FOLDS);
        let mut want = vec![Field::from(0u128); len];
        for n in 0..300 {
            let elements: Vec<Field> = (0..len)
                .map(|i| {
                    let v = if i == 0 {
                        q - 1 - rng.random_range(0..4u128)
                    } else {
                        rng.random::<u128>() % q
                    };
                    Field::from(v)
                })
                .collect();
            for (w, e) in want.iter_mut().zip(&elements) {
                *w += *e;
            }
            let limbs = share_limbs(&OutputShare::from(elements));
            assert!(limbs.iter().all(|&l| (0..1 << 16).contains(&l)));
            acc.add(n % FOLDS, &limbs);
        }
        let got: Vec<Field> = aggregate_share(&acc).as_ref().to_vec();
        assert_eq!(got, want);
    }
}
