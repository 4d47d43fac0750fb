//! `trainc init`.

use std::path::Path;

use super::{Failure, Out, Status, SummaryFormat, fail};

/// `trainc init`.
pub(super) fn init(
    cwd: &Path,
    stdout: &mut Out,
    dir: &Path,
    starter: &crate::init::Starter,
    force: bool,
    format: SummaryFormat,
) -> Result<Status, Failure> {
    let dir = cwd.join(dir);
    let written = crate::init::init(cwd, &dir, starter, force).map_err(fail(format.findings()))?;
    let files: Vec<String> = written
        .iter()
        .map(|f| crate::paths::display_name(cwd, &dir.join(f)))
        .collect();
    match format {
        SummaryFormat::Text => {
            for f in &files {
                let _ = writeln!(stdout, "wrote {f}");
            }
        }
        SummaryFormat::Json => {
            let body = serde_json::json!({"files": files});
            let _ = write!(stdout, "{}", crate::report::json(body, &[]));
        }
    }
    Ok(Status::Ok)
}
