use std::process::ExitCode;

use clap::Parser as _;
use trainc::cli::{self, Cli, Status};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = cli.color;
    match cli::run(cli) {
        Ok(Status::Ok) => ExitCode::SUCCESS,
        Ok(Status::Changes) => ExitCode::from(1),
        Ok(Status::Exit(code)) => ExitCode::from(code),
        Err(failure) => {
            cli::report(&failure, color);
            ExitCode::from(2)
        }
    }
}
