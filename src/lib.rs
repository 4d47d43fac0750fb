//! trainc: compile distributed training definitions into Kubernetes manifests.
//!
//! The pipeline, one module per stage: [`load`] → [`validate`] → [`compile`] →
//! [`emit`] → [`plan`]. [`pipeline`] wires them together and [`cli`] maps
//! commands and exit codes onto it; [`cache`] lets a build skip them all when
//! nothing changed.

// Diagnostics travel in `Err` on the cold path only; boxing them would add an
// allocation and noise at every call site for no measurable gain.
#![allow(clippy::result_large_err)]
// The library exists for the binary, its tests and its benches: its docs
// are read with `--document-private-items`, and may link to private items.
#![allow(rustdoc::private_intra_doc_links)]
// No unsafe code, but one system call the safe bindings lack
// (`sync_file_range`, in `plan::write`), allowed where it is made.
#![deny(unsafe_code)]

pub mod base;
pub mod build;
pub mod cache;
pub mod cli;
pub mod compile;
pub mod diagnostic;
pub mod diff;
pub mod emit;
pub mod grammar;
pub mod guard;
pub mod image;
pub mod import;
pub mod init;
pub mod library;
pub mod limits;
pub mod load;
pub mod model;
pub mod names;
pub mod par;
pub mod paths;
pub mod pipeline;
pub mod plan;
pub mod project;
pub mod quantity;
pub mod report;
pub mod resources;
pub mod run;
pub mod source;
pub mod suggest;
pub mod validate;
pub mod variant;
pub mod workspace;
