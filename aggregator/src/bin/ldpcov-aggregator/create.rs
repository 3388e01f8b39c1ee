//! `create`: create a collection on a running daemon and print its public parameters.

use anyhow::Result;
use clap::ValueEnum;
use ldpcov_proto::v1::{CollectionSpec, CreateCollectionRequest, Encoding};

use crate::admin::{ServerArgs, params_json, print_json, status_error};

/// The flags of `create`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
    /// Dimension p of each user's vector.
    #[arg(long, env = "LDPCOV_DIM")]
    dim: u32,
    /// ε of one report.
    #[arg(long, env = "LDPCOV_EPSILON")]
    epsilon: f64,
    /// δ of one report.
    #[arg(long, env = "LDPCOV_DELTA")]
    delta: f64,
    /// Clip radius R.
    #[arg(long, env = "LDPCOV_CLIP_RADIUS")]
    clip_radius: f64,
    /// Reports needed before an estimate is released.
    #[arg(long, env = "LDPCOV_MIN_REPORTS")]
    min_reports: u64,
    /// Wire encoding of reports (i16 and i8 re-quantise the noisy entries).
    #[arg(long, env = "LDPCOV_ENCODING", value_enum, default_value_t = WireEncoding::I32)]
    encoding: WireEncoding,
}

/// `--encoding`.
#[derive(Clone, Copy, ValueEnum)]
enum WireEncoding {
    /// 4 bytes per entry on the fine grid.
    I32,
    /// 2 bytes per entry (coarse grid, stochastic rounding).
    I16,
    /// 1 byte per entry (coarse grid, stochastic rounding).
    I8,
}

impl Options {
    /// Sends the spec; the daemon validates it and derives the parameters.
    pub(crate) async fn run(self) -> Result<()> {
        let spec = CollectionSpec {
            collection_id: self.id,
            dim: self.dim,
            epsilon: self.epsilon,
            delta: self.delta,
            clip_radius: self.clip_radius,
            min_reports: self.min_reports,
            encoding: match self.encoding {
                WireEncoding::I32 => Encoding::I32Le,
                WireEncoding::I16 => Encoding::I16Le,
                WireEncoding::I8 => Encoding::I8,
            } as i32,
            ..Default::default()
        };
        let params = self
            .server
            .connect()
            .await?
            .create_collection(CreateCollectionRequest { spec: Some(spec) })
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&params_json(&params))
    }
}
