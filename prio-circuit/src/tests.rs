//! The circuit's tests: valid reports aggregate exactly; each kind of invalid report is
//! rejected by the full circuit and let through by the circuit without the check that catches
//! it; tampered shares are rejected.

use super::*;
use prio::codec::{Encode, ParameterizedDecode};

const KEY: [u8; VERIFY_KEY_SIZE] = [7; VERIFY_KEY_SIZE];
const CTX: &[u8] = b"ldpcov-prio tests";
const NONCE: [u8; NONCE_SIZE] = [3; NONCE_SIZE];

/// p = 3, b = 4 (coordinates in [-8, 8)), B = 100 (7 slack bits).
fn small(output_x: bool) -> CovarianceReport {
    CovarianceReport::new(3, 4, 100, output_x).expect("parameters")
}

/// A client that shards any field vector (bypassing `encode`'s checks) and proves it against
/// the wrapped circuit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Forged(CovarianceReport);

impl Flp for Forged {
    type Field = Field;
    fn gadget(&self) -> Vec<Box<dyn Gadget<Field>>> {
        self.0.gadget()
    }
    fn num_gadgets(&self) -> usize {
        self.0.num_gadgets()
    }
    fn valid(
        &self,
        g: &mut Vec<Box<dyn Gadget<Field>>>,
        input: &[Field],
        joint_rand: &[Field],
        num_shares: usize,
    ) -> Result<Vec<Field>, FlpError> {
        self.0.valid(g, input, joint_rand, num_shares)
    }
    fn input_len(&self) -> usize {
        self.0.input_len()
    }
    fn proof_len(&self) -> usize {
        self.0.proof_len()
    }
    fn verifier_len(&self) -> usize {
        self.0.verifier_len()
    }
    fn joint_rand_len(&self) -> usize {
        self.0.joint_rand_len()
    }
    fn eval_output_len(&self) -> usize {
        self.0.eval_output_len()
    }
    fn prove_rand_len(&self) -> usize {
        self.0.prove_rand_len()
    }
}

impl Type for Forged {
    type Measurement = Vec<Field>;
    type AggregateResult = CovarianceSum;
    fn encode_measurement(&self, measurement: &Vec<Field>) -> Result<Vec<Field>, FlpError> {
        Ok(measurement.clone())
    }
    fn truncate(&self, input: Vec<Field>) -> Result<Vec<Field>, FlpError> {
        self.0.truncate(input)
    }
    fn decode_result(&self, data: &[Field], n: usize) -> Result<CovarianceSum, FlpError> {
        self.0.decode_result(data, n)
    }
    fn output_len(&self) -> usize {
        self.0.output_len()
    }
}

/// Shards `measurement` with the forging client, hands the shares (through their wire encoding)
/// to two aggregators running `circuit`, and returns the aggregate of this one report.
fn forge_and_verify(
    circuit: &CovarianceReport,
    measurement: &[Field],
) -> Result<CovarianceSum, Error> {
    assert_eq!(measurement.len(), circuit.input_len());
    let client = Prio3::<_, XofTurboShake128, 32>::new(
        NUM_AGGREGATORS,
        NUM_PROOFS,
        ALGORITHM_ID,
        Forged(circuit.clone()),
    )?;
    let (public_share, input_shares) = client.shard(CTX, &measurement.to_vec(), &NONCE)?;
    let vdaf = new_prio3(circuit.clone())?;
    let public_share = PublicShare::get_decoded_with_param(&vdaf, &public_share.get_encoded()?)?;
    let input_shares = input_shares
        .iter()
        .enumerate()
        .map(|(agg_id, share)| {
            InputShare::get_decoded_with_param(&(&vdaf, agg_id), &share.get_encoded()?)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out_shares = verify_report(&vdaf, &KEY, CTX, &NONCE, &public_share, &input_shares)?;
    let mut agg_shares = Vec::new();
    for out_share in &out_shares {
        let mut agg_share = vdaf.aggregate_init(&());
        agg_share.accumulate(out_share)?;
        agg_shares.push(agg_share);
    }
    Ok(vdaf.unshard(&(), agg_shares, 1)?)
}

/// Asserts the full circuit rejects `measurement`, the circuit without `culprit` accepts it, and
/// (when given) the circuits without each other check reject it too. Returns what the weakened
/// circuit aggregated.
fn rejected_only_by(culprit: Check, measurement: &[Field], others: &[Check]) -> CovarianceSum {
    let full = small(true);
    match forge_and_verify(&full, measurement) {
        Err(Error::Rejected(_)) => {}
        other => panic!("full circuit: want rejection, got {other:?}"),
    }
    for &check in others {
        match forge_and_verify(&full.clone().without(check), measurement) {
            Err(Error::Rejected(_)) => {}
            other => panic!("circuit without {check:?}: want rejection, got {other:?}"),
        }
    }
    forge_and_verify(&full.without(culprit), measurement)
        .unwrap_or_else(|e| panic!("circuit without {culprit:?} should accept: {e}"))
}

fn expected_sum(reports: &[Vec<i64>]) -> (Vec<i128>, Vec<i128>) {
    let p = reports[0].len();
    let mut y = vec![0i128; p * (p + 1) / 2];
    let mut x = vec![0i128; p];
    for r in reports {
        let mut k = 0;
        for i in 0..p {
            x[i] += i128::from(r[i]);
            for j in i..p {
                y[k] += i128::from(r[i]) * i128::from(r[j]);
                k += 1;
            }
        }
    }
    (y, x)
}

const VALID: [[i64; 3]; 5] = [[3, -4, 5], [-8, 0, 6], [7, 7, -1], [0, 0, 0], [-5, -5, -5]];

#[test]
fn valid_reports_are_accepted_and_their_sum_is_exact() {
    let reports: Vec<Vec<i64>> = VALID.iter().map(|r| r.to_vec()).collect();
    let (y, x) = expected_sum(&reports);
    for output_x in [false, true] {
        let vdaf = new_prio3(small(output_x)).expect("prio3");
        let sum = run_round(&vdaf, &KEY, CTX, &reports).expect("valid reports accepted");
        assert_eq!(sum.y, y);
        assert_eq!(sum.x, output_x.then(|| x.clone()));
    }
    // Every weakened circuit still accepts valid reports (the drops only remove checks).
    for check in [Check::Bits, Check::Products, Check::Norm] {
        let circuit = small(true).without(check);
        for r in &reports {
            let encoded = circuit.encode(r).expect("valid");
            forge_and_verify(&circuit, &encoded).expect("valid report");
        }
    }
}

#[test]
fn encoded_layout_is_bits_then_triangle_then_slack() {
    let circuit = small(false);
    assert_eq!(circuit.input_len(), 3 * 4 + 6 + 7);
    let m = circuit.encode(&[3, -4, 5]).expect("valid");
    let ints: Vec<u128> = m.iter().map(|&f| u128::from(f)).collect();
    // 3 + 8 = 11 = 0b1011, -4 + 8 = 4 = 0b0100, 5 + 8 = 13 = 0b1101 (least significant first).
    assert_eq!(&ints[..12], &[1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1]);
    assert_eq!(field_to_i128(m[12 + 1]), -12);
    // s = 100 - 50 = 50 = 0b0110010.
    assert_eq!(&ints[18..], &[0, 1, 0, 0, 1, 1, 0]);
}

#[test]
fn encode_refuses_bad_reports() {
    let circuit = small(false);
    assert!(matches!(
        circuit.encode(&[1, 2]),
        Err(Error::WrongLength { got: 2, want: 3 })
    ));
    assert!(matches!(
        circuit.encode(&[8, 0, 0]),
        Err(Error::OutOfRange {
            index: 0,
            value: 8,
            min: -8,
            max: 7
        })
    ));
    assert!(matches!(
        circuit.encode(&[0, -9, 0]),
        Err(Error::OutOfRange { index: 1, .. })
    ));
    assert!(matches!(
        circuit.encode(&[7, 7, 7]),
        Err(Error::NormTooLarge {
            norm: 147,
            bound: 100
        })
    ));
    assert!(circuit.encode(&[-8, -6, 0]).is_ok()); // ‖x‖² = 100 = B
    assert!(CovarianceReport::new(0, 4, 1, false).is_err());
    assert!(CovarianceReport::new(2, 1, 1, false).is_err());
    assert!(CovarianceReport::new(2, 33, 1, false).is_err());
    assert!(CovarianceReport::new(2, 4, 0, false).is_err());
}

#[test]
fn wrong_product_is_rejected() {
    let circuit = small(true);
    let mut m = circuit.encode(&[3, -4, 5]).expect("valid");
    // y_01 = -12 claimed as -11.
    m[12 + 1] += Field::one();
    let sum = rejected_only_by(Check::Products, &m, &[Check::Bits, Check::Norm]);
    assert_eq!(sum.y[1], -11);
}

#[test]
fn norm_over_the_bound_is_rejected() {
    // ‖(7, 7, 7)‖² = 147 > 100; consistent bits and products, slack bits forged as valid
    // bits (s = 0): Σ y_ii + s = 147 ≠ B.
    let circuit = small(true);
    let x = [7i64, 7, 7];
    let mut m = Vec::new();
    for v in x {
        push_bits(&mut m, (v + 8) as u128, 4);
    }
    for i in 0..3 {
        for j in i..3 {
            m.push(field_from_i128(i128::from(x[i] * x[j])));
        }
    }
    push_bits(&mut m, 0, circuit.slack_bits());
    let sum = rejected_only_by(Check::Norm, &m, &[Check::Bits, Check::Products]);
    assert_eq!(sum.y[0] + sum.y[3] + sum.y[5], 147);

    // The slack made to balance the equation (s = -47 in a bit slot) instead: the bit check
    // catches it.
    let slack_start = m.len() - circuit.slack_bits();
    m[slack_start] = -Field::from(47u128);
    rejected_only_by(Check::Bits, &m, &[Check::Products, Check::Norm]);
}

#[test]
fn coordinate_out_of_range_is_rejected() {
    // x_0 = -9 below the grid: x_0 + 8 = -1 put in the lowest bit slot (not a bit); products and
    // slack consistent with x = (-9, 0, 0): ‖x‖² = 81, s = 19.
    let circuit = small(true);
    let x = [-9i64, 0, 0];
    let mut m = vec![-Field::one(), Field::zero(), Field::zero(), Field::zero()];
    push_bits(&mut m, 8, 4);
    push_bits(&mut m, 8, 4);
    for i in 0..3 {
        for j in i..3 {
            m.push(field_from_i128(i128::from(x[i] * x[j])));
        }
    }
    push_bits(&mut m, 19, circuit.slack_bits());
    let sum = rejected_only_by(Check::Bits, &m, &[Check::Products, Check::Norm]);
    assert_eq!(sum.y[0], 81);
    assert_eq!(sum.x, Some(vec![-9, 0, 0]));
}

#[test]
fn tampered_share_is_rejected() {
    let x = vec![3, -4, 5];
    for circuit in [
        small(true),
        small(true).without(Check::Bits),
        small(true).without(Check::Products),
        small(true).without(Check::Norm),
    ] {
        let vdaf = new_prio3(circuit).expect("prio3");
        let (public_share, input_shares) = vdaf.shard(CTX, &x, &NONCE).expect("shard");
        verify_report(&vdaf, &KEY, CTX, &NONCE, &public_share, &input_shares)
            .expect("untampered shares accepted");
        for agg_id in 0..2 {
            let mut bytes = input_shares[agg_id].get_encoded().expect("encode");
            // The helper's share is seeds; the leader's starts with its measurement share's
            // first element (little-endian): flip a low bit of either.
            bytes[0] ^= 1;
            let mut tampered = input_shares.clone();
            tampered[agg_id] =
                InputShare::get_decoded_with_param(&(&vdaf, agg_id), &bytes).expect("decode");
            match verify_report(&vdaf, &KEY, CTX, &NONCE, &public_share, &tampered) {
                Err(Error::Rejected(_)) => {}
                other => panic!("aggregator {agg_id}'s share tampered: got {other:?}"),
            }
        }
    }
}

#[test]
fn sizes() {
    // A collection's grid: x = u·2^15 inside the unit ball (b = 17 bits, B = 2^30), x in the
    // output.
    for p in [20usize, 100] {
        let circuit = CovarianceReport::new(p, 17, 1 << 30, true).expect("parameters");
        let vdaf = new_prio3(circuit.clone()).expect("prio3");
        let x: Vec<i64> = (0..p)
            .map(|i| if i % 2 == 0 { 1000 } else { -1000 })
            .collect();
        let (public_share, input_shares) = vdaf.shard(CTX, &x, &NONCE).expect("shard");
        let public = public_share.get_encoded().expect("encode").len();
        let leader = input_shares[0].get_encoded().expect("encode").len();
        let helper = input_shares[1].get_encoded().expect("encode").len();
        println!(
            "sizes p={p} b=17 B={}: input_len={} (x bits {}, y {}, slack bits {}), \
             constraints T={}, chunk c={}, gadget calls M={}, degree {}, proof_len={}, \
             output_len={}, soundness 2^{:.1}; upload bytes: public share {public}, \
             leader input share {leader}, helper input share {helper}, total {}",
            circuit.norm_bound(),
            circuit.input_len(),
            p * 17,
            circuit.triangle_len(),
            circuit.slack_bits(),
            circuit.num_constraints(),
            circuit.chunk_length(),
            circuit.gadget_calls(),
            circuit.gadget_degree(),
            circuit.proof_len(),
            circuit.output_len(),
            circuit.soundness_error_log2(),
            public + leader + helper,
        );
        verify_report(&vdaf, &KEY, CTX, &NONCE, &public_share, &input_shares).expect("valid");
    }
}
