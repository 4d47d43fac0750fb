use std::process::ExitCode;

use clap::Parser as _;
use trainc::cli::{self, Cli, Status};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e`
/// (mimalloc.h), the same in mimalloc 2 and 3.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // Freed pages go back to the system at once, not a second later
    // (mimalloc 3's default): a build frees each file's documents and each
    // job's rendered files while it makes the next, and pages held that
    // long, in huge pages (which Cargo.toml's `no_thp` leaves alone), made
    // a 5,000-job build's peak memory a third larger (docs/development.md).
    // A user's own MIMALLOC_PURGE_DELAY stands.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        #[allow(unsafe_code)]
        // SAFETY: one thread runs yet, and the call only stores the value,
        // which mimalloc reads whenever it frees pages.
        unsafe {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
        }
    }
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
