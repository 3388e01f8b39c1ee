//! The device-side privacy budget ledger: [`BudgetLedger`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ldpcov_accounting::calibration::{zcdp_epsilon, zcdp_rho_for_epsilon};
use ldpcov_privacy::Collection;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// File name of the ledger inside its directory.
pub const LEDGER_FILE: &str = "ldpcov-ledger.json";

/// Why the ledger refused or failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The report would exceed a budget; nothing was spent.
    #[error(
        "privacy budget exceeded: this report (rho {rho}) would bring the {window} spend to rho {would_be} (epsilon {would_be_epsilon} at delta {delta}), above the budget of epsilon {budget_epsilon}"
    )]
    BudgetExceeded {
        /// "lifetime" or "period".
        window: &'static str,
        /// ρ of the refused report.
        rho: f64,
        /// ρ the window would reach.
        would_be: f64,
        /// The same as ε at the ledger's δ.
        would_be_epsilon: f64,
        /// The window's budget, as ε at the ledger's δ.
        budget_epsilon: f64,
        /// The ledger's δ.
        delta: f64,
    },
    /// A budget is not a positive number, or δ is outside (0, 1).
    #[error("invalid budget: {0}")]
    InvalidBudget(String),
    /// Reading or writing the ledger file failed.
    #[error("ledger file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The ledger file exists but is not a ledger.
    #[error("ledger file {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The budgets a device allows, as ε at a common δ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetLimits {
    /// Budget over the device's whole life.
    pub lifetime_epsilon: f64,
    /// Budget over any trailing period of `period`, if any.
    pub period_epsilon: Option<f64>,
    /// Length of the period.
    pub period: Duration,
    /// δ at which the budgets are stated.
    pub delta: f64,
}

impl Default for BudgetLimits {
    /// Lifetime ε = 10 and ε = 4 per 30 days, both at δ = 1e-6: room for about one
    /// ε = 1 report a month (each such report, δ = 1e-6, is ρ ≈ 0.028).
    fn default() -> Self {
        BudgetLimits {
            lifetime_epsilon: 10.0,
            period_epsilon: Some(4.0),
            period: Duration::from_secs(30 * 24 * 3600),
            delta: 1e-6,
        }
    }
}

/// One recorded spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Collection reported to.
    pub collection_id: String,
    /// zCDP ρ of the report.
    pub rho: f64,
    /// The report's own (ε, δ), for the record.
    pub epsilon: f64,
    /// The report's own δ.
    pub delta: f64,
    /// When, in seconds since the Unix epoch.
    pub unix_secs: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct LedgerFile {
    version: u32,
    spends: Vec<Spend>,
}

/// A persistent record of the privacy a device has spent.
///
/// Every report spends privacy. A device that contributes to many collections (or to
/// the same one many times) composes those spends; Tang et al. (2017) found Apple's
/// deployment spending far more than its per-report ε suggested. The ledger keeps
/// every spend in a file in a directory the app chooses and refuses, with
/// [`LedgerError::BudgetExceeded`], a report that would exceed a lifetime or a
/// per-period budget.
///
/// **Composition.** Each report of a collection is a Gaussian mechanism with zCDP
/// parameter `ρ = Δ²/(2σ²)` (for the exact discrete Gaussian too: Canonne, Kamath &
/// Steinke 2020, Theorem 14). zCDP composes by adding ρ (Bun & Steinke 2016, Lemma 2.3),
/// and ρ-zCDP implies `(ρ + 2√(ρ ln(1/δ)), δ)`-DP for every δ (their Proposition 1.3).
/// A budget "ε at δ" is therefore the ρ budget `(√(ln(1/δ) + ε) − √(ln(1/δ)))²`, and a
/// spend is allowed when the spends it joins (all of them for the lifetime budget,
/// those of the last period for the period budget) plus it stay within that ρ.
///
/// **Durability.** A spend is written to disk (temporary file, `fsync`, rename, `fsync`
/// of the directory) *before* [`BudgetLedger::charge`] returns, so a report is never
/// built on budget that a crash could forget. A missing file is an empty ledger; a
/// file that cannot be read or parsed is an error (the device refuses to report rather
/// than forget its history). One process should own a ledger directory at a time.
#[derive(Debug)]
pub struct BudgetLedger {
    path: PathBuf,
    dir: PathBuf,
    limits: BudgetLimits,
    spends: Vec<Spend>,
}

impl BudgetLedger {
    /// Opens (or starts) the ledger in `dir` with the given budgets.
    pub fn open(dir: impl AsRef<Path>, limits: BudgetLimits) -> Result<Self, LedgerError> {
        for (name, v) in [
            ("lifetime epsilon", Some(limits.lifetime_epsilon)),
            ("period epsilon", limits.period_epsilon),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v > 0.0)
            {
                return Err(LedgerError::InvalidBudget(format!(
                    "{name} {v} must be a positive number"
                )));
            }
        }
        if !(limits.delta > 0.0 && limits.delta < 1.0) {
            return Err(LedgerError::InvalidBudget(format!(
                "delta {} must lie in (0, 1)",
                limits.delta
            )));
        }
        let dir = dir.as_ref().to_path_buf();
        let path = dir.join(LEDGER_FILE);
        let spends = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: LedgerFile =
                    serde_json::from_slice(&bytes).map_err(|e| LedgerError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                if file.version != 1 {
                    return Err(LedgerError::Corrupt {
                        path,
                        reason: format!("unknown version {}", file.version),
                    });
                }
                if let Some(bad) = file
                    .spends
                    .iter()
                    .find(|s| !(s.rho.is_finite() && s.rho >= 0.0))
                {
                    return Err(LedgerError::Corrupt {
                        path,
                        reason: format!("spend with rho {}", bad.rho),
                    });
                }
                file.spends
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(LedgerError::Io { path, source }),
        };
        Ok(BudgetLedger {
            path,
            dir,
            limits,
            spends,
        })
    }

    /// The recorded spends, oldest first.
    pub fn spends(&self) -> &[Spend] {
        &self.spends
    }

    /// Total ρ spent over the device's life (`+0.0` for a fresh ledger).
    pub fn lifetime_rho(&self) -> f64 {
        // Folded from +0.0: `Sum for f64` starts from -0.0, so an empty ledger would
        // report -0.0 (and `lifetime_epsilon` -0.0 with it).
        self.spends.iter().fold(0.0, |total, s| total + s.rho)
    }

    /// Total lifetime spend as ε at the ledger's δ.
    pub fn lifetime_epsilon(&self) -> f64 {
        zcdp_epsilon(self.lifetime_rho(), self.limits.delta)
    }

    /// Records one report to `collection` now, or refuses it. See [`charge_at`](Self::charge_at).
    pub fn charge(&mut self, collection: &Collection) -> Result<(), LedgerError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.charge_at(collection, now)
    }

    /// Records one report to `collection` at `unix_secs`, or refuses it with
    /// [`LedgerError::BudgetExceeded`] if it would exceed the lifetime budget or the
    /// budget of the period ending at `unix_secs`. The spend is on disk before this
    /// returns `Ok`; on any error nothing is spent.
    pub fn charge_at(
        &mut self,
        collection: &Collection,
        unix_secs: u64,
    ) -> Result<(), LedgerError> {
        let rho = collection.rho();
        let delta = self.limits.delta;
        let lifetime = self.lifetime_rho() + rho;
        let budget = zcdp_rho_for_epsilon(self.limits.lifetime_epsilon, delta);
        if lifetime > budget {
            return Err(self.exceeded("lifetime", rho, lifetime, self.limits.lifetime_epsilon));
        }
        if let Some(period_epsilon) = self.limits.period_epsilon {
            let since = unix_secs.saturating_sub(self.limits.period.as_secs());
            let recent: f64 = self
                .spends
                .iter()
                .filter(|s| s.unix_secs > since)
                .fold(0.0, |total, s| total + s.rho)
                + rho;
            if recent > zcdp_rho_for_epsilon(period_epsilon, delta) {
                return Err(self.exceeded("period", rho, recent, period_epsilon));
            }
        }
        self.spends.push(Spend {
            collection_id: collection.id().to_string(),
            rho,
            epsilon: collection.report_epsilon(),
            delta: collection.delta(),
            unix_secs,
        });
        if let Err(e) = self.persist() {
            self.spends.pop();
            return Err(e);
        }
        Ok(())
    }

    fn exceeded(
        &self,
        window: &'static str,
        rho: f64,
        would_be: f64,
        budget_epsilon: f64,
    ) -> LedgerError {
        LedgerError::BudgetExceeded {
            window,
            rho,
            would_be,
            would_be_epsilon: zcdp_epsilon(would_be, self.limits.delta),
            budget_epsilon,
            delta: self.limits.delta,
        }
    }

    /// Writes the ledger atomically: temporary file, fsync, rename, fsync directory.
    fn persist(&self) -> Result<(), LedgerError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LedgerError::Io { path, source }
        };
        let bytes = serde_json::to_vec_pretty(&LedgerFile {
            version: 1,
            spends: self.spends.clone(),
        })
        .map_err(|e| LedgerError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let tmp = self.dir.join(format!("{LEDGER_FILE}.tmp"));
        {
            let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(&bytes).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path))?;
        #[cfg(unix)]
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(id: &str, epsilon: f64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: id.into(),
            dim: 5,
            epsilon,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: 0,
            ..Default::default()
        })
        .unwrap()
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ldpcov-ledger-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_fresh_ledger_has_spent_positive_zero() {
        let dir = tempdir("fresh");
        let ledger = BudgetLedger::open(&dir, BudgetLimits::default()).unwrap();
        assert!(ledger.spends().is_empty());
        // +0.0, not -0.0 (which compares equal to 0.0 but prints "-0"): check the bits.
        assert_eq!(ledger.lifetime_rho().to_bits(), 0.0f64.to_bits());
        assert_eq!(ledger.lifetime_epsilon().to_bits(), 0.0f64.to_bits());
        assert_eq!(format!("{}", ledger.lifetime_epsilon()), "0");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lifetime_budget_composes_by_zcdp_and_refuses_the_report_that_exceeds_it() {
        let dir = tempdir("lifetime");
        let limits = BudgetLimits {
            lifetime_epsilon: 3.0,
            period_epsilon: None,
            ..BudgetLimits::default()
        };
        let mut ledger = BudgetLedger::open(&dir, limits).unwrap();
        let c = collection("a", 1.0);
        // ρ budget for ε = 3 at δ = 1e-6 is (√(13.8155 + 3) − √13.8155)² = 0.1476; one
        // ε = 1 report is ρ = Δ²/(2σ²) ≈ 2/(2·5.9746²) = 0.0280: five fit, the sixth not.
        let budget = zcdp_rho_for_epsilon(3.0, 1e-6);
        let fit = (budget / c.rho()).floor() as usize;
        assert_eq!(fit, 5);
        for _ in 0..fit {
            ledger.charge_at(&c, 1000).unwrap();
        }
        let err = ledger.charge_at(&c, 1000).unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::BudgetExceeded {
                    window: "lifetime",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(ledger.spends().len(), fit);
        assert!(ledger.lifetime_epsilon() <= 3.0);
        // Survives reopening: still refused.
        let mut again = BudgetLedger::open(&dir, limits).unwrap();
        assert_eq!(again.spends().len(), fit);
        assert!(again.charge_at(&c, 2000).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn period_budget_frees_up_after_the_period() {
        let dir = tempdir("period");
        let limits = BudgetLimits {
            lifetime_epsilon: 100.0,
            period_epsilon: Some(1.5),
            period: Duration::from_secs(100),
            delta: 1e-6,
        };
        let mut ledger = BudgetLedger::open(&dir, limits).unwrap();
        let c = collection("b", 1.0);
        let per_period = (zcdp_rho_for_epsilon(1.5, 1e-6) / c.rho()).floor() as usize;
        assert!(per_period >= 1);
        for k in 0..per_period {
            ledger.charge_at(&c, 1_000 + k as u64).unwrap();
        }
        assert!(matches!(
            ledger.charge_at(&c, 1_050),
            Err(LedgerError::BudgetExceeded {
                window: "period",
                ..
            })
        ));
        // 100 s after the first spends, they leave the window.
        ledger
            .charge_at(&c, 1_000 + 100 + per_period as u64)
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_or_invalid_ledgers_are_refused() {
        let dir = tempdir("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(LEDGER_FILE), b"{not json").unwrap();
        assert!(matches!(
            BudgetLedger::open(&dir, BudgetLimits::default()),
            Err(LedgerError::Corrupt { .. })
        ));
        std::fs::write(dir.join(LEDGER_FILE), br#"{"version":1,"spends":[{"collection_id":"x","rho":-1,"epsilon":1,"delta":1e-6,"unix_secs":1}]}"#).unwrap();
        assert!(matches!(
            BudgetLedger::open(&dir, BudgetLimits::default()),
            Err(LedgerError::Corrupt { .. })
        ));
        for bad in [
            BudgetLimits {
                lifetime_epsilon: 0.0,
                ..BudgetLimits::default()
            },
            BudgetLimits {
                period_epsilon: Some(f64::NAN),
                ..BudgetLimits::default()
            },
            BudgetLimits {
                delta: 1.0,
                ..BudgetLimits::default()
            },
        ] {
            assert!(matches!(
                BudgetLedger::open(&dir, bad),
                Err(LedgerError::InvalidBudget(_))
            ));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_spends_nothing() {
        // Opened on an empty directory that then turns into a file: every write fails.
        let dir = tempdir("unwritable");
        let mut ledger = BudgetLedger::open(&dir, BudgetLimits::default()).unwrap();
        std::fs::write(&dir, b"a file").unwrap();
        assert!(matches!(
            ledger.charge_at(&collection("c", 1.0), 1),
            Err(LedgerError::Io { .. })
        ));
        assert!(ledger.spends().is_empty());
        std::fs::remove_file(&dir).unwrap();
    }
}
