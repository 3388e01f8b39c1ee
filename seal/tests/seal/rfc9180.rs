//! RFC 9180 known-answer test: the suite this crate uses, run through the `hpke`
//! dependency, reproduces the RFC's test vector A.2.1 (DHKEM(X25519, HKDF-SHA256),
//! HKDF-SHA256, ChaCha20Poly1305, mode Base, sequence number 0). So the suite is the
//! standard one, and another RFC 9180 implementation (the TypeScript client's
//! `@hpke/core`) can be checked against the same numbers.
//!
//! Source: RFC 9180, Appendix A.2.1 ("Base Setup Information" and "Encryptions",
//! sequence number 0), <https://www.rfc-editor.org/rfc/rfc9180.html#appendix-A.2.1>.
//! The RFC text was not reachable from the machine this was written on; the values
//! were transcribed from several independent public projects that quote that appendix
//! and agree byte for byte, and this test, computing them from ikmE and ikmR alone,
//! confirms them.

use hpke::aead::ChaCha20Poly1305;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::rand_core::{TryCryptoRng, TryRng};
use hpke::{Deserializable, Kem, OpModeR, OpModeS, Serializable};

const MODE: u8 = 0;
const KEM_ID: u16 = 32;
const KDF_ID: u16 = 1;
const AEAD_ID: u16 = 3;
const INFO: &str = "4f6465206f6e2061204772656369616e2055726e"; // "Ode on a Grecian Urn"
const IKM_E: &str = "909a9b35d3dc4713a5e72a4da274b55d3d3821a37e5d099e74a647db583a904b";
const PK_EM: &str = "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a";
const IKM_R: &str = "1ac01f181fdf9f352797655161c58b75c656a6cc2716dcb66372da835542e1df";
const PK_RM: &str = "4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a";
const SK_RM: &str = "8057991eef8f1f1af18f4a9491d16a1ce333f695d4db8e38da75975c4478e0fb";
const ENC: &str = "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a";
// Encryptions, sequence number 0.
const PT: &str = "4265617574792069732074727574682c20747275746820626561757479"; // "Beauty is truth, truth beauty"
const AAD: &str = "436f756e742d30"; // "Count-0"
const CT: &str =
    "1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28";

fn bytes(hex: &str) -> Vec<u8> {
    hex::decode(hex).expect("test vector hex")
}

/// RFC 7748's clamping of an X25519 scalar.
fn clamp(mut scalar: Vec<u8>) -> Vec<u8> {
    scalar[0] &= 248;
    scalar[31] &= 127;
    scalar[31] |= 64;
    scalar
}

/// An "RNG" that hands out fixed bytes: the RFC's ikmE, which the KEM's Encap turns into
/// the ephemeral key pair with DeriveKeyPair.
struct Replay(Vec<u8>);

impl TryRng for Replay {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        hpke::rand_core::utils::next_word_via_fill(self)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        hpke::rand_core::utils::next_word_via_fill(self)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        assert!(dst.len() <= self.0.len(), "the KEM drew more than ikmE");
        let rest = self.0.split_off(dst.len());
        dst.copy_from_slice(&self.0);
        self.0 = rest;
        Ok(())
    }
}
impl TryCryptoRng for Replay {}

#[test]
fn the_suite_is_rfc_9180_a_2() {
    // The suite the crate uses has the vector's ids.
    assert_eq!(MODE, 0, "mode Base");
    assert_eq!(
        (
            ldpcov_seal::KEM_ID,
            ldpcov_seal::KDF_ID,
            ldpcov_seal::AEAD_ID
        ),
        (KEM_ID, KDF_ID, AEAD_ID)
    );
    assert_eq!(<X25519HkdfSha256 as Kem>::KEM_ID, KEM_ID);

    // DeriveKeyPair(ikmR): the recipient's key pair.
    let (sk_r, pk_r) = X25519HkdfSha256::derive_keypair(&bytes(IKM_R));
    assert_eq!(pk_r.to_bytes().as_slice(), bytes(PK_RM));
    // The appendix lists skRm as DeriveKeyPair's expand step outputs it; RFC 9180 §7.1.2
    // says SerializePrivateKey of X25519 MUST clamp, which the dependency does.
    assert_eq!(sk_r.to_bytes().as_slice(), clamp(bytes(SK_RM)));
    // DeriveKeyPair(ikmE): the ephemeral public key is enc.
    let (_, pk_e) = X25519HkdfSha256::derive_keypair(&bytes(IKM_E));
    assert_eq!(pk_e.to_bytes().as_slice(), bytes(PK_EM));

    // SetupBaseS with the ephemeral key from ikmE, then the first Seal.
    let pk_r = <X25519HkdfSha256 as Kem>::PublicKey::from_bytes(&bytes(PK_RM)).expect("pkRm");
    let mut rng = Replay(bytes(IKM_E));
    let (enc, mut sender) = hpke::setup_sender_with_rng::<
        ChaCha20Poly1305,
        HkdfSha256,
        X25519HkdfSha256,
    >(&OpModeS::Base, &pk_r, &bytes(INFO), &mut rng)
    .expect("setup sender");
    assert!(rng.0.is_empty(), "Encap used exactly the 32 bytes of ikmE");
    assert_eq!(enc.to_bytes().as_slice(), bytes(ENC));
    let ct = sender.seal(&bytes(PT), &bytes(AAD)).expect("seal");
    assert_eq!(hex::encode(&ct), CT);

    // SetupBaseR and the first Open.
    let sk_r = <X25519HkdfSha256 as Kem>::PrivateKey::from_bytes(&bytes(SK_RM)).expect("skRm");
    let enc = <X25519HkdfSha256 as Kem>::EncappedKey::from_bytes(&bytes(ENC)).expect("enc");
    let mut receiver = hpke::setup_receiver::<ChaCha20Poly1305, HkdfSha256, X25519HkdfSha256>(
        &OpModeR::Base,
        &sk_r,
        &enc,
        &bytes(INFO),
    )
    .expect("setup receiver");
    assert_eq!(
        receiver.open(&bytes(CT), &bytes(AAD)).expect("open"),
        bytes(PT)
    );
}
