//! Writes the shared test vectors: `ldpcov-test-vectors --write <path>` (the committed
//! file is `testing/vectors/reports-v1.json`), or prints them without `--write`.

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = ldpcov_test_vectors::render()?;
    match args.as_slice() {
        [] => print!("{text}"),
        [flag, path] if flag == "--write" => {
            std::fs::write(path, &text).with_context(|| format!("cannot write {path}"))?;
            eprintln!("wrote {path} ({} bytes)", text.len());
        }
        _ => bail!("usage: ldpcov-test-vectors [--write <path>]"),
    }
    Ok(())
}
