//! The typed definition (as written), the project file, and the resolved job.

pub mod definition;
pub mod job;
pub mod project;
pub mod schema;

pub use job::Job;
