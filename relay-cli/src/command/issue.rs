//! `issue-device-token`: print the device token of a device id.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use ldpcov_relay::DeviceTokenIssuer;
use ldpcov_relay::constants::DEFAULT_DEVICE_TOKEN_LIFETIME;

/// The flags of `issue-device-token`.
#[derive(clap::Args)]
pub(crate) struct IssueArgs {
    /// File holding the device-token secret (64 hex digits).
    #[arg(long, env = "LDPCOV_RELAY_DEVICE_TOKEN_SECRET_FILE")]
    device_token_secret_file: PathBuf,
    /// The device id: 1 to 128 characters of [A-Za-z0-9._-].
    #[arg(long, env = "LDPCOV_RELAY_DEVICE_ID")]
    device_id: String,
    /// How long the token is valid, seconds (the relay refuses it afterwards).
    #[arg(long, env = "LDPCOV_RELAY_DEVICE_TOKEN_LIFETIME_SECS", default_value_t = DEFAULT_DEVICE_TOKEN_LIFETIME.as_secs())]
    lifetime_secs: u64,
}

impl IssueArgs {
    /// Prints the token of `--device-id`, valid for `--lifetime-secs`.
    pub(crate) fn run(self) -> Result<()> {
        let issuer = DeviceTokenIssuer::from_file(&self.device_token_secret_file)?;
        if self.lifetime_secs == 0 {
            bail!("--lifetime-secs must be at least 1");
        }
        let token = issuer.issue_for(&self.device_id, Duration::from_secs(self.lifetime_secs))?;
        println!("{token}");
        Ok(())
    }
}
