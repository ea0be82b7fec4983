//! The `bunko-bench` command; see the library docs and `bunko-bench --help`.

use std::process::ExitCode;

use clap::Parser;

use bunko_bench::{Options, Status};

fn main() -> ExitCode {
    let opts = Options::parse();
    if !opts.compare.is_empty() {
        return finish(bunko_bench::compare(&opts).map(|()| true));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return finish(Err(err.into())),
    };
    let rows = runtime.block_on(bunko_bench::run(&opts));
    finish(rows.map(|rows| rows.iter().all(|row| row.status != Status::Failed)))
}

/// Success unless something failed (skipped workloads are not failures).
fn finish(outcome: bunko_bench::Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("bunko-bench: some workloads failed (see FAILED above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("bunko-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
