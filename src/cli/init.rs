//! `trainc init`.

use std::io::Write as _;
use std::path::Path;

use super::{Failure, Format, Out, Status, fail};

/// `trainc init`.
pub(super) fn init(
    cwd: &Path,
    stdout: &mut Out,
    dir: &Path,
    starter: &crate::init::Starter,
    force: bool,
) -> Result<Status, Failure> {
    let dir = cwd.join(dir);
    let written = crate::init::init(&dir, starter, force).map_err(fail(Format::Text))?;
    for f in written {
        let _ = writeln!(
            stdout,
            "wrote {}",
            crate::load::display_name(cwd, &dir.join(f))
        );
    }
    Ok(Status::Ok)
}
