//! Writes the shared test vectors: `ldpcov-test-vectors --write <path>` (the committed
//! file is `testing/vectors/reports-v1.json`) and `--write-sealed <path>` (the sealed
//! reports, `testing/vectors/sealed-v1.json`) and `--write-layered <path>` (the relay's
//! layer over them, `testing/vectors/relay-layer-v1.json`) and `--write-two-aggregator <path>`
//! (`testing/vectors/two-aggregator-v1.json`), or prints the report vectors without a flag.

use anyhow::{Context, bail};

fn write(path: &str, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {path}"))?;
    eprintln!("wrote {path} ({} bytes)", text.len());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => print!("{}", ldpcov_test_vectors::render()?),
        [flag, path] if flag == "--write" => write(path, &ldpcov_test_vectors::render()?)?,
        [flag, path] if flag == "--write-layered" => {
            write(path, &ldpcov_test_vectors::render_layered()?)?;
        }
        [flag, path] if flag == "--write-two-aggregator" => {
            write(path, &ldpcov_test_vectors::render_two_aggregator()?)?;
        }
        [flag, path] if flag == "--write-sealed" => {
            write(path, &ldpcov_test_vectors::render_sealed()?)?;
        }
        _ => bail!(
            "usage: ldpcov-test-vectors [--write <path> | --write-sealed <path> | --write-layered <path> | --write-two-aggregator <path>]"
        ),
    }
    Ok(())
}
