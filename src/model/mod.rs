//! The typed definition (as written), the project file, the framework
//! presets, and the resolved job.

pub mod definition;
pub mod job;
pub mod preset;
pub mod project;
pub mod schema;

pub use job::Job;
